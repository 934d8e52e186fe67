"""``cv2.resize`` on torch, batch-first, reproducing cv2's sampling grid and weights exactly.

Our own torch code rather than kornia's resize (``F.interpolate``): kornia's bilinear and bicubic
match cv2 on float images within 1.6e-3 on 0..255 (measured), but its INTER_AREA is adaptive pooling
(up to 61 levels off at a 2.2x downscale: cv2 averages fractional cell overlaps), it has no
lanczos4, its nearest is not cv2's floor(dst * scale) nor NEAREST_EXACT's accumulated double, and it
has no uint8 fixed-point rounding; it also needs NCHW float. One tap-based implementation covers
every mode and dtype here: each output axis is a set of taps (source indices and weights per
destination index) computed the way cv2's ``resize`` computes them, applied horizontally then
vertically with ``index_select`` (no dense matrices), on NHWC data as it arrives.

uint8: cv2 quantizes the weights of linear/cubic/lanczos to 11-bit fixed point. INTER_LINEAR
emulates the integer arithmetic of cv2's SIMD path (exact except in clamped border rows and SIMD
tails of narrow images, where cv2's scalar code rounds differently by 1), and so does INTER_AREA
upscaling, which cv2 runs as a linear resize with area coefficients; cubic and lanczos4 use the
quantized weights in float32 (within 1 level). Float results match within float32 rounding.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from codedag.errors import UnsupportedOperation
from codedag.migrate.ops._cv2_common import as_nhwc, check_image, like_input, saturate, work_dtype

INTER_NEAREST = 0
INTER_LINEAR = 1
INTER_CUBIC = 2
INTER_AREA = 3
INTER_LANCZOS4 = 4
INTER_LINEAR_EXACT = 5
INTER_NEAREST_EXACT = 6
_COEF_SCALE = 2048  # INTER_RESIZE_COEF_SCALE

Taps = tuple[np.ndarray, np.ndarray]  # (dst, K) int64 indices, (dst, K) float64 weights


def _cubic_coeffs(x: np.ndarray) -> np.ndarray:
    a = np.float32(-0.75)
    x = x.astype(np.float32)
    c0 = ((a * (x + 1) - 5 * a) * (x + 1) + 8 * a) * (x + 1) - 4 * a
    c1 = ((a + 2) * x - (a + 3)) * x * x + 1
    c2 = ((a + 2) * (1 - x) - (a + 3)) * (1 - x) * (1 - x) + 1
    return np.stack([c0, c1, c2, 1 - c0 - c1 - c2], axis=1).astype(np.float64)


def _lanczos4_coeffs(x: np.ndarray) -> np.ndarray:
    s45 = 0.70710678118654752440084436210485
    cs = np.array(
        [[1, 0], [-s45, -s45], [0, 1], [s45, -s45], [-1, 0], [s45, s45], [0, -1], [-s45, s45]]
    )
    xd = x.astype(np.float64)[:, None]
    y0 = -(xd + 3) * math.pi * 0.25
    s0, c0 = np.sin(y0), np.cos(y0)
    y = -(xd + 3 - np.arange(8)) * math.pi * 0.25
    with np.errstate(divide="ignore", invalid="ignore"):
        coeffs = ((cs[:, 0] * s0 + cs[:, 1] * c0) / (y * y)).astype(np.float32)
        coeffs = coeffs * (np.float32(1.0) / coeffs.sum(axis=1, dtype=np.float32))[:, None]
    tiny = x < np.finfo(np.float32).eps
    coeffs[tiny] = 0.0
    coeffs[tiny, 3] = 1.0
    return coeffs.astype(np.float64)


def _area_down_taps(src: int, dst: int, scale: float) -> Taps:
    rows: list[list[tuple[int, float]]] = []
    for dx in range(dst):
        fsx1 = dx * scale
        fsx2 = fsx1 + scale
        cell = min(scale, src - fsx1)
        sx1, sx2 = math.ceil(fsx1), math.floor(fsx2)
        sx2 = min(sx2, src - 1)
        sx1 = min(sx1, sx2)
        row = []
        if sx1 - fsx1 > 1e-3:
            row.append((sx1 - 1, float(np.float32((sx1 - fsx1) / cell))))
        row.extend((sx, float(np.float32(1.0 / cell))) for sx in range(sx1, sx2))
        if fsx2 - sx2 > 1e-3:
            row.append((sx2, float(np.float32(min(min(fsx2 - sx2, 1.0), cell) / cell))))
        rows.append(row)
    k = max(len(r) for r in rows)
    idx = np.zeros((dst, k), np.int64)
    w = np.zeros((dst, k), np.float64)
    for i, row in enumerate(rows):
        for j, (s, a) in enumerate(row):
            idx[i, j], w[i, j] = s, a
    return idx, w


@lru_cache(maxsize=128)
def axis_taps(src: int, dst: int, inv_scale: float, mode: int, area_down: bool) -> Taps:
    """Source indices and weights of one axis, as cv2's resize computes them."""
    scale = 1.0 / inv_scale
    dx = np.arange(dst, dtype=np.float64)
    if mode == INTER_NEAREST:
        sx = np.minimum(np.floor(dx * scale).astype(np.int64), src - 1)
        return sx[:, None], np.ones((dst, 1))
    if mode == INTER_NEAREST_EXACT:
        # cv2 5 (Pillow's rule): start at scale/2, add scale per pixel in double, truncate.
        step, f, out = src / dst, (src / dst) * 0.5, []
        for _ in range(dst):
            out.append(min(math.floor(f), src - 1))
            f += step
        sx = np.array(out, dtype=np.int64)
        return sx[:, None], np.ones((dst, 1))
    if mode == INTER_AREA and area_down:
        return _area_down_taps(src, dst, scale)
    if mode == INTER_AREA:
        sx = np.floor(dx * scale).astype(np.int64)
        fx = ((dx + 1) - (sx + 1) * inv_scale).astype(np.float32)
        fx = np.where(fx <= 0, np.float32(0), fx - np.floor(fx))
    else:
        fx = ((dx + 0.5) * scale - 0.5).astype(np.float32)
        sx = np.floor(fx).astype(np.int64)
        fx = fx - sx.astype(np.float32)
    if mode in (INTER_LINEAR, INTER_AREA):
        low, high = sx < 0, sx >= src - 1
        fx = np.where(low | high, np.float32(0), fx)
        sx = np.where(low, 0, np.where(high, src - 1, sx))
        w = np.stack([1 - fx, fx], axis=1).astype(np.float64)
        first = 0
    elif mode == INTER_CUBIC:
        w, first = _cubic_coeffs(fx), -1
    else:
        w, first = _lanczos4_coeffs(fx), -3
    offsets = np.arange(first, first + w.shape[1])
    idx = np.clip(sx[:, None] + offsets, 0, src - 1)
    return idx, w


def _apply_taps(x: torch.Tensor, dim: int, idx: np.ndarray, w: torch.Tensor) -> torch.Tensor:
    shape = [1, 1, 1, 1]
    shape[dim] = idx.shape[0]
    idx_t = torch.as_tensor(idx, device=x.device)
    out = None
    for k in range(idx.shape[1]):
        term = x.index_select(dim, idx_t[:, k]) * w[:, k].reshape(shape)
        out = term if out is None else out + term
    assert out is not None
    return out


def _clamped(src: int, dst: int, inv_scale: float) -> np.ndarray:
    f = ((np.arange(dst) + 0.5) / inv_scale - 0.5).astype(np.float32)
    s = np.floor(f)
    return (s < 0) | (s >= src - 1)


def _linear_u8_exact(x: torch.Tensor, tx: Taps, ty: Taps, rows_clamped: np.ndarray) -> torch.Tensor:
    """cv2's fixed-point bilinear for uint8: 11-bit weights, SIMD vertical rounding."""
    dev = x.device

    def q(w: np.ndarray) -> torch.Tensor:
        return torch.as_tensor(np.round(w * _COEF_SCALE).astype(np.int32), device=dev)

    xi = x.to(torch.int32)
    wx, wy = q(tx[1]), q(ty[1])
    ix, iy = torch.as_tensor(tx[0], device=dev), torch.as_tensor(ty[0], device=dev)
    h = xi.index_select(2, ix[:, 0]) * wx[:, 0].view(1, 1, -1, 1)
    h = h + xi.index_select(2, ix[:, 1]) * wx[:, 1].view(1, 1, -1, 1)
    full = h
    h = h >> 4
    s0 = (h.index_select(1, iy[:, 0]) * wy[:, 0].view(1, -1, 1, 1)) >> 16
    s1 = (h.index_select(1, iy[:, 1]) * wy[:, 1].view(1, -1, 1, 1)) >> 16
    out = (s0 + s1 + 2) >> 2
    flat = torch.as_tensor(rows_clamped, device=dev)  # border rows: cv2 copies the horizontal pass
    if bool(flat.any()):
        rows = (full.index_select(1, iy[:, 0]) + 1023) >> 11  # cv2 rounds half down here
        out = torch.where(flat.view(1, -1, 1, 1), rows, out)
    return out.clamp(0, 255).to(torch.uint8)


def resize(
    src: torch.Tensor,
    dsize: Any,
    dst: Any = None,
    fx: float = 0,
    fy: float = 0,
    interpolation: int = INTER_LINEAR,
) -> torch.Tensor:
    """``cv2.resize`` for a batch (N,H,W[,C]); modes nearest, nearest-exact, linear, cubic, area,
    lanczos4 (INTER_LINEAR_EXACT is served by the bit-exact uint8 linear path)."""
    check_image(src, dtypes=(torch.uint8, torch.float32, torch.float64))
    if dst is not None:
        raise UnsupportedOperation("resize: an output array dst is not supported")
    mode = int(interpolation)
    if mode not in (0, 1, 2, 3, 4, 5, 6):
        raise UnsupportedOperation(f"resize: interpolation {interpolation} unsupported")
    if mode == INTER_LINEAR_EXACT:
        if src.dtype != torch.uint8:
            raise UnsupportedOperation("resize: INTER_LINEAR_EXACT is reproduced for uint8 only")
        mode = INTER_LINEAR
    sh, sw = int(src.shape[1]), int(src.shape[2])
    if dsize is not None and tuple(int(v) for v in dsize) != (0, 0):
        dw, dh = (int(v) for v in dsize)
        ifx, ify = dw / sw, dh / sh
    else:
        if not (fx > 0 and fy > 0):
            raise UnsupportedOperation(f"resize: need dsize or fx, fy > 0, got {fx=}, {fy=}")
        dw, dh = round(sw * fx), round(sh * fy)
        ifx, ify = float(fx), float(fy)
    if dw <= 0 or dh <= 0:
        raise UnsupportedOperation(f"resize: output size must be positive, got {(dw, dh)}")
    if (dw, dh) == (sw, sh):
        return src.clone()
    x = as_nhwc(src)
    scale_x, scale_y = 1.0 / ifx, 1.0 / ify
    isx, isy = round(scale_x), round(scale_y)
    area_fast = abs(scale_x - isx) < 2.2e-16 and abs(scale_y - isy) < 2.2e-16
    if mode == INTER_LINEAR and area_fast and isx == 2 and isy == 2:
        mode = INTER_AREA  # cv2 does the same switch
    area_down = mode == INTER_AREA and scale_x >= 1 and scale_y >= 1
    tx = axis_taps(sw, dw, ifx, mode, area_down)
    ty = axis_taps(sh, dh, ify, mode, area_down)
    if mode in (INTER_NEAREST, INTER_NEAREST_EXACT):
        iy = torch.as_tensor(ty[0][:, 0], device=x.device)
        ix = torch.as_tensor(tx[0][:, 0], device=x.device)
        return like_input(x.index_select(1, iy).index_select(2, ix), src)
    if src.dtype == torch.uint8 and mode == INTER_LINEAR:
        return like_input(_linear_u8_exact(x, tx, ty, _clamped(sh, dh, ify)), src)
    if src.dtype == torch.uint8 and mode == INTER_AREA and not area_down:
        sy = np.floor(np.arange(dh) / ify).astype(np.int64)
        return like_input(_linear_u8_exact(x, tx, ty, sy >= sh - 1), src)
    wdt = work_dtype(src.dtype)
    wx, wy = tx[1], ty[1]
    if not src.dtype.is_floating_point and not area_down:
        wx = np.round(wx * _COEF_SCALE) / _COEF_SCALE
        wy = np.round(wy * _COEF_SCALE) / _COEF_SCALE
    xf = x.to(wdt)
    h = _apply_taps(xf, 2, tx[0], torch.as_tensor(wx, dtype=wdt, device=x.device))
    out = _apply_taps(h, 1, ty[0], torch.as_tensor(wy, dtype=wdt, device=x.device))
    if src.dtype == torch.uint8 and area_fast and area_down and isx == 2 and isy == 2:
        out = torch.floor(out + 0.5)  # cv2's 2x2 uint8 average rounds half up: (sum + 2) >> 2
    return like_input(saturate(out, src.dtype), src)

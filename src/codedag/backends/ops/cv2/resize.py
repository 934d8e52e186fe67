"""``cv2.resize`` on torch, batch-first, reproducing cv2's sampling grid and weights exactly.

Our own torch code rather than kornia's resize (``F.interpolate``): kornia's bilinear and bicubic
match cv2 on float images within 1.6e-3 on 0..255 (measured), but its INTER_AREA is adaptive pooling
(up to 61 levels off at a 2.2x downscale: cv2 averages fractional cell overlaps), it has no
lanczos4, its nearest is not cv2's floor(dst * scale) nor NEAREST_EXACT's accumulated double, and it
has no uint8 fixed-point rounding; it also needs NCHW float. One tap-based implementation covers
every mode and dtype here: each output axis is a set of taps (source indices and weights per
destination index) computed the way cv2's ``resize`` computes them, applied horizontally then
vertically with ``index_select`` (no dense matrices), on NHWC data as it arrives.

uint8: cv2 quantizes the weights of linear/cubic/lanczos to 11-bit fixed point. INTER_LINEAR (and
INTER_AREA upscaling, which cv2 runs as a linear resize with area coefficients) emulates the integer
arithmetic of cv2's SIMD path bit for bit, including its unclamped vertical fractions at the
borders; integer-scale INTER_AREA reproduces cv2's cell sums and roundings exactly; cubic and
lanczos4 use the quantized weights in float32 (within 1 level). Float results match within float32
rounding.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import MAX_OUTPUT_VALUES, Tolerance
from codedag.backends.host_sync import host_sync_allowed
from codedag.backends.ops.cv2._adapter import op
from codedag.backends.ops.cv2._common import (
    as_nhwc,
    channels_of,
    check_image,
    finite,
    int_pair,
    is_int,
    is_number,
    like_input,
    no_output,
    saturate,
    work_dtype,
)
from codedag.errors import UnsupportedOperation

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
def axis_taps(
    src: int, dst: int, inv_scale: float, mode: int, area_down: bool, vertical: bool = False
) -> Taps:
    """Source indices and weights of one axis, as cv2's resize computes them.

    cv2 clamps the linear fraction at the borders horizontally only; vertically it keeps the
    fraction and clips the row indices (which matters for uint8's fixed-point rounding).
    """
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
        if not vertical:
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


@dataclass(frozen=True)
class _LinearU8Plan:
    """One uint8 bilinear resize's taps on its device, both taps of an axis side by side.

    Attributes:
        rows: ``(R, 1)`` source rows the vertical taps read, or ``None`` (nearly all rows).
        cols: ``(1, 2 * dw)`` (``(2 * dw,)`` without ``rows``) source columns: first taps,
            then second taps.
        wx: ``(1, 1, 2 * dw, 1)`` int32 horizontal weights, 11-bit fixed point.
        iy: ``(2 * dh,)`` rows of the horizontal result (renumbered into ``rows``).
        wy: ``(1, 2 * dh, 1, 1)`` int32 vertical weights, 11-bit fixed point.
        bias: ``(1, 2 * dh, 1, 1)`` int32: cv2's final ``+ 2`` before ``>> 2``, moved before the
            first tap's ``>> 16`` (as ``2 << 16``: a right shift is a floor division).
    """

    rows: torch.Tensor | None
    cols: torch.Tensor
    wx: torch.Tensor
    iy: torch.Tensor
    wy: torch.Tensor
    bias: torch.Tensor


@lru_cache(maxsize=256)
def _linear_u8_plan(
    sw: int,
    sh: int,
    dw: int,
    dh: int,
    ifx: float,
    ify: float,
    mode: int,
    device: torch.device,
) -> _LinearU8Plan:
    """The taps of :func:`_linear_u8_exact`, built once per sizes, scales, mode and device: a
    call then uploads nothing."""
    ix, wx = axis_taps(sw, dw, ifx, mode, False)
    iy, wy = axis_taps(sh, dh, ify, mode, False, vertical=True)
    rows, iy = _used_rows(iy, sh)
    cols = torch.as_tensor(np.concatenate([ix[:, 0], ix[:, 1]]), device=device)
    qx, qy = _quantized(wx), _quantized(wy)
    bias = np.zeros(2 * dh, np.int32)
    bias[:dh] = 2 << 16
    return _LinearU8Plan(
        rows=None if rows is None else torch.as_tensor(rows, device=device).view(-1, 1),
        cols=cols if rows is None else cols.view(1, -1),
        wx=torch.as_tensor(np.concatenate([qx[:, 0], qx[:, 1]]), device=device).view(1, 1, -1, 1),
        iy=torch.as_tensor(np.concatenate([iy[:, 0], iy[:, 1]]), device=device),
        wy=torch.as_tensor(np.concatenate([qy[:, 0], qy[:, 1]]), device=device).view(1, -1, 1, 1),
        bias=torch.as_tensor(bias, device=device).view(1, -1, 1, 1),
    )


def _linear_u8_exact(x: torch.Tensor, plan: _LinearU8Plan) -> torch.Tensor:
    """cv2's fixed-point bilinear for uint8: 11-bit weights, SIMD vertical rounding.

    Horizontal pass on the source rows the vertical taps read, ``(x0 * wx0 + x1 * wx1) >> 4``;
    vertical pass ``((h0 * wy0) >> 16) + ((h1 * wy1) >> 16) + 2 >> 2``. Each pass gathers both
    taps at once, then adds its two halves: 13 aten ops a call, nothing uploaded. Weights sum to
    2048 on each axis, so the result never exceeds 255.
    """
    if plan.rows is None:
        g = x.index_select(2, plan.cols)
    else:
        g = x[:, plan.rows, plan.cols]
    h = g.to(torch.int32).mul_(plan.wx)  # in place: a promoting product is a slow pass on CPU
    first, second = h.chunk(2, 2)
    h = first + second  # on CPU 3x faster than a sum over a size-2 axis
    h >>= 4
    v = torch.addcmul(plan.bias, h.index_select(1, plan.iy), plan.wy)
    v >>= 16
    first, second = v.chunk(2, 1)
    out = first + second
    out >>= 2
    return out.to(torch.uint8)


def linear_u8_taps(src: int, dst: int, inv_scale: float, vertical: bool) -> Taps:
    """One axis of cv2's uint8 INTER_LINEAR: ``(dst, 2)`` source indices and ``(dst, 2)``
    int32 weights in 11-bit fixed point (what :func:`_linear_u8_exact` applies)."""
    idx, w = axis_taps(src, dst, inv_scale, INTER_LINEAR, False, vertical=vertical)
    return idx, _quantized(w)


def area_switch(ifx: float, ify: float) -> bool:
    """Whether cv2 runs a linear resize of these inverse scales as INTER_AREA (an exact 2x
    shrink on both axes)."""
    scale_x, scale_y = 1.0 / ifx, 1.0 / ify
    isx, isy = round(scale_x), round(scale_y)
    exact = abs(scale_x - isx) < 2.2e-16 and abs(scale_y - isy) < 2.2e-16
    return exact and isx == 2 and isy == 2


def _quantized(w: np.ndarray) -> np.ndarray:
    return np.round(w * _COEF_SCALE).astype(np.int32)


def _used_rows(iy: np.ndarray, height: int) -> tuple[np.ndarray | None, np.ndarray]:
    """The source rows the taps read (``None``: nearly all) and the taps renumbered into them."""
    rows = np.unique(iy)
    if len(rows) > 0.9 * height:
        return None, iy
    return rows, np.searchsorted(rows, iy)


@lru_cache(maxsize=128)
def _exact_taps(src: int, dst: int, inv_scale: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """INTER_LINEAR_EXACT taps: 8-bit fixed-point weights; which outputs lie outside the source."""
    f = (np.arange(dst) + 0.5) / inv_scale - 0.5
    i = np.floor(f).astype(np.int64)
    w1 = np.rint((f - i) * 256).astype(np.int64)
    outside_lo, outside_hi = i < 0, i >= src - 1
    i = np.where(outside_lo, 0, np.where(outside_hi, src - 1, i))
    w1 = np.where(outside_lo | outside_hi, 0, w1)
    idx = np.stack([i, np.minimum(i + 1, src - 1)], axis=1)
    return idx, np.stack([256 - w1, w1], axis=1), outside_lo | outside_hi


def _linear_exact_u8(
    x: torch.Tensor, sw: int, sh: int, dw: int, dh: int, ifx: float, ify: float
) -> torch.Tensor:
    """cv2's bit-exact INTER_LINEAR_EXACT: 8-bit weights, rows outside the source copied."""
    dev = x.device
    ix, wx, _ = (torch.as_tensor(a, device=dev) for a in _exact_taps(sw, dw, ifx))
    iy, wy, rows_out = (torch.as_tensor(a, device=dev) for a in _exact_taps(sh, dh, ify))
    xi = x.to(torch.int32)
    wx, wy = wx.to(torch.int32), wy.to(torch.int32)
    h = xi.index_select(2, ix[:, 0]) * wx[:, 0].view(1, 1, -1, 1)
    h = h + xi.index_select(2, ix[:, 1]) * wx[:, 1].view(1, 1, -1, 1)  # 8 fraction bits
    h0 = h.index_select(1, iy[:, 0])
    v = h0 * wy[:, 0].view(1, -1, 1, 1) + h.index_select(1, iy[:, 1]) * wy[:, 1].view(1, -1, 1, 1)
    out = torch.where(rows_out.view(1, -1, 1, 1), (h0 + 128) >> 8, (v + (1 << 15)) >> 16)
    return out.clamp(0, 255).to(torch.uint8)


def _box_taps(
    src: int, dst: int, step: int, dev: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """Indices (dst, step) of integer-scale cells and their validity (inside the image)."""
    idx = np.arange(dst)[:, None] * step + np.arange(step)[None, :]
    valid = idx < src
    return torch.as_tensor(np.minimum(idx, src - 1), device=dev), torch.as_tensor(valid, device=dev)


def _rounds_by_shift(sx: int, sy: int, channels: int) -> bool:
    """Whether cv2 rounds a whole cell as ``(sum + 2) >> 2`` (half up): its ``resizeAreaFast``
    vector path, taken for 2x2 cells of 1, 3 or 4 channels only. Every other cell, 4x1 and 1x4
    (also of area 4) and 2x2 of 2 channels included, is ``sum * float32(1/area)`` rounded half to
    even, which differs at exact halves."""
    return sx == 2 and sy == 2 and channels in (1, 3, 4)


def _area_fast_u8(x: torch.Tensor, sx: int, sy: int, dw: int, dh: int) -> torch.Tensor:
    """cv2's integer-scale INTER_AREA for uint8: exact cell sums; inside, sum * float32(1/area)
    (but see :func:`_rounds_by_shift`); cells cut by the border: float32(sum) / count."""
    n, h, w, c = x.shape
    if h % sy or w % sx or h // sy != dh or w // sx != dw:
        return _area_cells_u8(x, sx, sy, dw, dh)
    area = sx * sy
    wide = torch.int16 if area * 255 < 2**15 else torch.int32
    if host_sync_allowed():  # the CPU: a shifted add per cell row and column (faster there)
        rows = x.view(n, dh, sy, w * c)  # the sy source rows of each output row, then columns
        total = rows[:, :, 0].to(wide)
        for k in range(1, sy):
            total += rows[:, :, k]
        cells = total.view(n, dh, dw, sx * c)
        out = cells[..., :c].clone()
        for k in range(1, sx):
            out += cells[..., k * c : (k + 1) * c]
    else:  # a device: each output pixel's cell (sy rows of sx pixels) summed in one pass
        out = x.view(n, dh, sy, dw, sx, c).sum((2, 4), dtype=wide)
    if _rounds_by_shift(sx, sy, c):
        out += 2
        out >>= 2
        return out.to(torch.uint8)
    scaled = out.to(torch.float32) * torch.tensor(1.0 / area, dtype=torch.float32)
    return torch.round(scaled).clamp_(0, 255).to(torch.uint8)


def _area_cells_u8(x: torch.Tensor, sx: int, sy: int, dw: int, dh: int) -> torch.Tensor:
    """:func:`_area_fast_u8` where cells are cut by the border (taps with their validity)."""
    dev = x.device
    ix, vx = _box_taps(int(x.shape[2]), dw, sx, dev)
    iy, vy = _box_taps(int(x.shape[1]), dh, sy, dev)
    xf = x.to(torch.float32)
    h = _apply_taps(xf, 2, ix.cpu().numpy(), vx.to(torch.float32))
    total = _apply_taps(h, 1, iy.cpu().numpy(), vy.to(torch.float32))  # exact integer sums
    count = (vy.sum(1).view(1, -1, 1, 1) * vx.sum(1).view(1, 1, -1, 1)).to(torch.float32)
    area = sx * sy
    if _rounds_by_shift(sx, sy, int(x.shape[3])):
        inside = torch.floor((total + 2) / 4)
    else:
        inside = torch.round(total * torch.tensor(1.0 / area, dtype=torch.float32))
    border = torch.round(total / count)
    return torch.where(count == area, inside, border).clamp(0, 255).to(torch.uint8)


def resize(
    src: torch.Tensor,
    dsize: object,
    dst: object = None,
    fx: float = 0,
    fy: float = 0,
    interpolation: int = INTER_LINEAR,
) -> torch.Tensor:
    """``cv2.resize`` for a batch (N,H,W[,C]); modes nearest, nearest-exact, linear,
    linear-exact (uint8), cubic, area, lanczos4."""
    check_image(src, dtypes=(torch.uint8, torch.float32, torch.float64))
    no_output("resize", dst)
    mode = int(interpolation)
    if mode not in (0, 1, 2, 3, 4, 5, 6):
        raise UnsupportedOperation(f"resize: interpolation {interpolation} unsupported")
    if mode == INTER_LINEAR_EXACT and src.dtype != torch.uint8:
        raise UnsupportedOperation("resize: INTER_LINEAR_EXACT is reproduced for uint8 only")
    sh, sw = int(src.shape[1]), int(src.shape[2])
    size = output_size(sw, sh, dsize, fx, fy)
    if size is None:
        raise UnsupportedOperation(f"resize: no output size from dsize={dsize!r}, {fx=}, {fy=}")
    dw, dh, ifx, ify = size
    if (dw, dh) == (sw, sh):
        return src.clone()
    x = as_nhwc(src)
    scale_x, scale_y = 1.0 / ifx, 1.0 / ify
    isx, isy = round(scale_x), round(scale_y)
    area_fast = abs(scale_x - isx) < 2.2e-16 and abs(scale_y - isy) < 2.2e-16
    if mode in (INTER_LINEAR, INTER_LINEAR_EXACT) and area_switch(ifx, ify):
        mode = INTER_AREA  # cv2 does the same switch
    if mode == INTER_LINEAR_EXACT:
        return like_input(_linear_exact_u8(x, sw, sh, dw, dh, ifx, ify), src)
    area_down = mode == INTER_AREA and scale_x >= 1 and scale_y >= 1
    tx = axis_taps(sw, dw, ifx, mode, area_down)
    ty = axis_taps(sh, dh, ify, mode, area_down, vertical=True)
    if mode in (INTER_NEAREST, INTER_NEAREST_EXACT):
        iy = torch.as_tensor(ty[0][:, 0], device=x.device)
        ix = torch.as_tensor(tx[0][:, 0], device=x.device)
        return like_input(x.index_select(1, iy).index_select(2, ix), src)
    if src.dtype == torch.uint8 and (
        mode == INTER_LINEAR or (mode == INTER_AREA and not area_down)
    ):
        plan = _linear_u8_plan(sw, sh, dw, dh, ifx, ify, mode, x.device)
        return like_input(_linear_u8_exact(x, plan), src)
    if src.dtype == torch.uint8 and area_fast and area_down:
        return like_input(_area_fast_u8(x, isx, isy, dw, dh), src)
    wdt = work_dtype(src.dtype)
    wx, wy = tx[1], ty[1]
    if not src.dtype.is_floating_point and not area_down:
        wx = np.round(wx * _COEF_SCALE) / _COEF_SCALE
        wy = np.round(wy * _COEF_SCALE) / _COEF_SCALE
    xf = x.to(wdt)
    h = _apply_taps(xf, 2, tx[0], torch.as_tensor(wx, dtype=wdt, device=x.device))
    out = _apply_taps(h, 1, ty[0], torch.as_tensor(wy, dtype=wdt, device=x.device))
    return like_input(saturate(out, src.dtype), src)


def output_size(
    sw: int, sh: int, dsize: Any, fx: Any, fy: Any
) -> tuple[int, int, float, float] | None:
    """cv2's output size and inverse scales: ``dsize`` unless a side is <= 0, then the source size
    times ``fx``, ``fy`` rounded (both must be > 0); ``None`` where cv2 raises."""
    pair = (0, 0) if dsize is None else int_pair(dsize)
    if pair is None:
        return None
    dw, dh = pair
    if dw > 0 and dh > 0:
        return dw, dh, dw / sw, dh / sh
    if not (is_number(fx) and is_number(fy)) or not (fx > 0 and fy > 0):
        return None
    dw, dh = round(sw * float(fx)), round(sh * float(fy))
    if dw <= 0 or dh <= 0:
        return None
    return dw, dh, float(fx), float(fy)


def check_resize(
    src: Any,
    dsize: Any,
    dst: Any = None,
    fx: Any = 0,
    fy: Any = 0,
    interpolation: Any = INTER_LINEAR,
) -> str | None:
    """An output size cv2 accepts (integers in int32, > 0, or from positive fx, fy), a known
    interpolation (LINEAR_EXACT on uint8 only), outputs below :data:`MAX_OUTPUT_VALUES`."""
    if not (is_number(fx) and is_number(fy)):
        return f"fx, fy {(fx, fy)!r} are not numbers"
    if dsize is not None:
        pair = int_pair(dsize)
        if pair is None:
            return f"dsize {dsize!r} is not a pair of integers (cv2 refuses it)"
        if max(abs(pair[0]), abs(pair[1])) >= 2**31:
            return f"dsize {dsize!r} does not fit a cv2 Size (int32)"
    size = output_size(int(src.shape[1]), int(src.shape[0]), dsize, fx, fy)
    if size is None:
        return f"no output size from dsize={dsize!r}, fx={fx!r}, fy={fy!r}"
    dw, dh = size[0], size[1]
    if dw >= 2**31 or dh >= 2**31 or dw * dh * channels_of(src) > MAX_OUTPUT_VALUES:
        return f"output {dw}x{dh}x{channels_of(src)} beyond {MAX_OUTPUT_VALUES} values"
    if not is_int(interpolation) or int(interpolation) not in range(7):
        return f"interpolation {interpolation!r} unknown (0..6 are reproduced)"
    if int(interpolation) == INTER_LINEAR_EXACT and src.dtype != np.uint8:
        return "INTER_LINEAR_EXACT is reproduced for uint8 only"
    if not finite(src):
        return "non-finite values: where a tap weighs 0, cv2 skips it and torch multiplies inf by 0"
    return None


OPS = [
    op(
        "cv2.resize",
        resize,
        reproduces=(
            "`dsize` or `fx`/`fy` (cv2's sampling scale from fx), NEAREST, NEAREST_EXACT, LINEAR, "
            "LINEAR_EXACT (uint8), CUBIC, AREA (down- and upscaling), LANCZOS4"
        ),
        check=check_resize,
        dtypes=frozenset({"uint8", "float32", "float64"}),
        channels=(1, 2, 3, 4),
        tolerance=Tolerance(
            atol=1e-2,
            rtol=1e-5,
            max_mismatch_frac=1.0,
            mismatch_atol=1.0,
            note="uint8 nearest, linear (cv2's 11-bit fixed point) and area exact; uint8 cubic "
            "differs by 1 in ~5% of values (cv2 runs it through Intel IPP on x86), lanczos4 "
            "rarely; float linear/cubic within 6e-3 on 0..255 at 400 px (cv2 5 accumulates differently), "
            "area/lanczos4 within 2e-4",
        ),
    )
]

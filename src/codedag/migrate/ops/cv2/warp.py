"""``cv2.warpAffine`` and ``cv2.warpPerspective`` on torch, batch-first.

Our own torch code rather than ``kornia.geometry.warp_affine`` (``grid_sample``): kornia matches
cv2's float bilinear with a zero constant border within 2e-3 on 0..255 (measured), but not cv2 5's
other rules: nearest rounds the source coordinate half to even; cubic (A=-0.75) clamps coordinates
to [-L, 2L], L = max(size, 16); lanczos4, and nearest/linear on float64 images, round the coordinate
to 1/32 pixel in fixed point (affine: 10-bit ``AB_BITS`` steps), uint8 lanczos4 with cv2's 15-bit
weight table; uint8 results round as cv2's; and grid_sample has no reflect101/wrap border and no
per-channel fill value. Here every border mode applies per tap, as cv2's remap does, and the same
map serves every image of the batch. Nearest, uint8 linear and uint8 lanczos4 match cv2 bit for bit;
float results within float32 rounding. Not reproduced (UnsupportedOperation): BORDER_TRANSPARENT,
cubic on float64.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

import numpy as np
import torch

from codedag.errors import UnsupportedOperation
from codedag.migrate.contract import Fidelity
from codedag.migrate.ops.cv2._adapter import op
from codedag.migrate.ops.cv2._common import (
    BORDER_CONSTANT,
    BORDER_REFLECT,
    BORDER_REFLECT_101,
    BORDER_REPLICATE,
    BORDER_WRAP,
    as_nhwc,
    border_type_base,
    channels,
    check_image,
    like_input,
    saturate,
    scalar_values,
    to_numpy_matrix,
)
from codedag.migrate.ops.cv2.resize import _cubic_coeffs, _lanczos4_coeffs

INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4 = 0, 1, 2, 3, 4
WARP_INVERSE_MAP = 16
_AB_BITS, _INTER_BITS = 10, 5
_TAB = 1 << _INTER_BITS
_BORDERS = (BORDER_CONSTANT, BORDER_REPLICATE, BORDER_REFLECT, BORDER_WRAP, BORDER_REFLECT_101)


def _torch_border(p: torch.Tensor, length: int, border: int) -> torch.Tensor:
    """``cv::borderInterpolate`` on a tensor of indices; -1 for constant-border positions."""
    inside = (p >= 0) & (p < length)
    if border == BORDER_CONSTANT:
        return torch.where(inside, p, torch.full_like(p, -1))
    if border == BORDER_REPLICATE:
        return p.clamp(0, length - 1)
    if border == BORDER_WRAP:
        return torch.remainder(p, length)
    if length == 1:
        return torch.zeros_like(p)
    delta = 1 if border == BORDER_REFLECT_101 else 0
    period = 2 * length - 2 * delta
    q = torch.remainder(p, period)
    return torch.where(q < length, q, period - q - (1 - delta))


def _parse_flags(flags: int) -> tuple[int, bool]:
    flags = int(flags)
    mode = flags & 7
    if flags & ~(7 | WARP_INVERSE_MAP):
        raise UnsupportedOperation(f"warp: flags {flags} unsupported (interpolation | inverse map)")
    if mode == INTER_AREA:
        mode = INTER_LINEAR  # cv2 does the same
    if mode not in (INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_LANCZOS4):
        raise UnsupportedOperation(f"warp: interpolation {mode} unsupported")
    return mode, bool(flags & WARP_INVERSE_MAP)


def _invert_affine(m: np.ndarray) -> np.ndarray:
    d = m[0, 0] * m[1, 1] - m[0, 1] * m[1, 0]
    d = 1.0 / d if d != 0 else 0.0
    a11, a22, a12, a21 = m[1, 1] * d, m[0, 0] * d, -m[0, 1] * d, -m[1, 0] * d
    b1 = -a11 * m[0, 2] - a12 * m[1, 2]
    b2 = -a21 * m[0, 2] - a22 * m[1, 2]
    return np.array([[a11, a12, b1], [a21, a22, b2]])


def _affine_coords(m: np.ndarray, dw: int, dh: int, nearest: bool, dev: torch.device):
    """Fixed-point source coordinates of every destination pixel, as cv2's warpAffine."""
    f64 = torch.float64
    x = torch.arange(dw, dtype=f64, device=dev)
    y = torch.arange(dh, dtype=f64, device=dev)
    ab = float(1 << _AB_BITS)
    delta = (1 << _AB_BITS) // 2 if nearest else (1 << _AB_BITS) // _TAB // 2
    shift = _AB_BITS if nearest else _AB_BITS - _INTER_BITS
    x0 = torch.round((m[0, 1] * y + m[0, 2]) * ab).long() + delta
    y0 = torch.round((m[1, 1] * y + m[1, 2]) * ab).long() + delta
    adelta = torch.round(m[0, 0] * x * ab).long()
    bdelta = torch.round(m[1, 0] * x * ab).long()
    xs = (x0[:, None] + adelta[None, :]) >> shift
    ys = (y0[:, None] + bdelta[None, :]) >> shift
    return xs.reshape(-1), ys.reshape(-1)


def _perspective_coords(m: np.ndarray, dw: int, dh: int, nearest: bool, dev: torch.device):
    """Source coordinates (integer, or in 1/32 pixel) of every destination pixel, as cv2's."""
    f64 = torch.float64
    x = torch.arange(dw, dtype=f64, device=dev)[None, :]
    y = torch.arange(dh, dtype=f64, device=dev)[:, None]
    xw = m[0, 0] * x + m[0, 1] * y + m[0, 2]
    yw = m[1, 0] * x + m[1, 1] * y + m[1, 2]
    w = m[2, 0] * x + m[2, 1] * y + m[2, 2]
    num = 1.0 if nearest else float(_TAB)
    w = torch.where(w != 0, num / torch.where(w != 0, w, torch.ones_like(w)), torch.zeros_like(w))
    lim = float(2**31 - 1)
    xs = torch.round((xw * w).clamp(-lim - 1, lim)).long()
    ys = torch.round((yw * w).clamp(-lim - 1, lim)).long()
    return xs.reshape(-1), ys.reshape(-1)


@lru_cache(maxsize=1)
def _lanczos4_itab() -> np.ndarray:
    """cv2's 2-D fixed-point lanczos4 weights (``initInterTab2D``): (32*32, 64) int32, sum 2**15."""
    grid = np.arange(_TAB, dtype=np.float32) / _TAB
    tab1 = _lanczos4_coeffs(grid).astype(np.float32)  # (32, 8)
    out = np.zeros((_TAB * _TAB, 64), dtype=np.int64)
    for i in range(_TAB):
        for j in range(_TAB):
            v = (tab1[i][:, None] * tab1[j][None, :]).astype(np.float32)  # (y taps, x taps)
            itab = np.rint(v.astype(np.float64) * 32768).astype(np.int64)
            diff = int(itab.sum()) - 32768
            if diff:
                mk = big = (4, 4)
                for k1 in (4, 5):
                    for k2 in (4, 5):
                        if itab[k1, k2] < itab[mk]:
                            mk = (k1, k2)
                        elif itab[k1, k2] > itab[big]:
                            big = (k1, k2)
                if diff < 0:
                    itab[big] -= diff
                else:
                    itab[mk] -= diff
            out[i * _TAB + j] = itab.reshape(-1)
    return out.astype(np.int32)


def _float_coords(m: np.ndarray, dw: int, dh: int, perspective: bool, dev: torch.device):
    """Source coordinates (float64) of every destination pixel."""
    x = torch.arange(dw, dtype=torch.float64, device=dev)[None, :]
    y = torch.arange(dh, dtype=torch.float64, device=dev)[:, None]
    xs = m[0, 0] * x + m[0, 1] * y + m[0, 2]
    ys = m[1, 0] * x + m[1, 1] * y + m[1, 2]
    if perspective:
        w = m[2, 0] * x + m[2, 1] * y + m[2, 2]
        w = torch.where(w != 0, 1.0 / torch.where(w != 0, w, torch.ones_like(w)), 0.0)
        xs, ys = xs * w, ys * w
    lim = float(2**30)
    return xs.clamp(-lim, lim).reshape(-1), ys.clamp(-lim, lim).reshape(-1)


def _cubic_torch(f: torch.Tensor) -> torch.Tensor:
    a = -0.75
    c0 = ((a * (f + 1) - 5 * a) * (f + 1) + 8 * a) * (f + 1) - 4 * a
    c1 = ((a + 2) * f - (a + 3)) * f * f + 1
    c2 = ((a + 2) * (1 - f) - (a + 3)) * (1 - f) * (1 - f) + 1
    return torch.stack([c0, c1, c2, 1 - c0 - c1 - c2], dim=1)


def _taps_1d(coord: torch.Tensor, mode: int, fixed: bool) -> tuple[torch.Tensor, int, torch.Tensor]:
    """Integer base index, first tap offset and (P, K) float64 weights of each coordinate."""
    if fixed:  # 1/32-pixel fixed point (lanczos4, and every mode for float64 data)
        base, frac = coord >> _INTER_BITS, coord & (_TAB - 1)
        grid = np.arange(_TAB, dtype=np.float32) / _TAB
        if mode == INTER_LINEAR:
            table_np, first = np.stack([1 - grid, grid], axis=1).astype(np.float64), 0
        elif mode == INTER_CUBIC:
            table_np, first = _cubic_coeffs(grid), -1
        else:
            table_np, first = _lanczos4_coeffs(grid), -3
        return base, first, torch.as_tensor(table_np, device=coord.device)[frac]
    c32 = coord.to(torch.float32)
    base = torch.floor(c32)
    f = c32 - base
    if mode == INTER_LINEAR:
        w = torch.stack([1 - f, f], dim=1)
        return base.long(), 0, w.to(torch.float64)
    return base.long(), -1, _cubic_torch(f).to(torch.float64)


def _remap(
    x: torch.Tensor,
    xs: torch.Tensor,
    ys: torch.Tensor,
    dw: int,
    dh: int,
    mode: int,
    border: int,
    cval: list[float],
) -> torch.Tensor:
    n, h, w, c = x.shape
    flat = x.reshape(n, h * w, c)
    fill = saturate(torch.tensor(cval, dtype=torch.float64), x.dtype).to(x.device)

    def gather(ix: torch.Tensor, iy: torch.Tensor) -> torch.Tensor:
        bx, by = _torch_border(ix, w, border), _torch_border(iy, h, border)
        ok = (bx >= 0) & (by >= 0)
        idx = torch.where(ok, by * w + bx, torch.zeros_like(bx))
        vals = flat.index_select(1, idx)
        if border == BORDER_CONSTANT and not bool(ok.all()):
            vals = torch.where(ok.view(1, -1, 1), vals, fill.to(vals.dtype).view(1, 1, c))
        return vals

    if mode == INTER_NEAREST:
        return gather(xs, ys).reshape(n, dh, dw, c)
    fixed = mode == INTER_LANCZOS4 or x.dtype == torch.float64
    if mode == INTER_LANCZOS4 and x.dtype == torch.uint8:
        # cv2's integer path: 15-bit 2-D weights from its table, rounding half up.
        table = torch.as_tensor(_lanczos4_itab(), device=x.device)
        weights = table[(ys & (_TAB - 1)) * _TAB + (xs & (_TAB - 1))]  # (P, 64)
        ix, iy = (xs >> _INTER_BITS) - 3, (ys >> _INTER_BITS) - 3
        acc = torch.zeros((n, ix.numel(), c), dtype=torch.int32, device=x.device)
        for ky in range(8):
            for kx in range(8):
                vals = gather(ix + kx, iy + ky).to(torch.int32)
                acc += vals * weights[:, ky * 8 + kx].view(1, -1, 1)
        out_u8 = ((acc + (1 << 14)) >> 15).clamp(0, 255).to(torch.uint8)
        return out_u8.reshape(n, dh, dw, c)
    if mode == INTER_CUBIC and not fixed:
        # Measured on cv2 5: cubic clamps source coordinates to [-L, 2L], L = max(size, 16).
        lx, ly = float(max(w, 16)), float(max(h, 16))
        xs, ys = xs.clamp(-lx, 2 * lx), ys.clamp(-ly, 2 * ly)
    ix, first, wx = _taps_1d(xs, mode, fixed)
    iy, _, wy = _taps_1d(ys, mode, fixed)
    wdt = torch.float64 if x.dtype == torch.float64 else torch.float32
    wx, wy = wx.to(wdt), wy.to(wdt)
    out = torch.zeros((n, ix.numel(), c), dtype=wdt, device=x.device)
    k = wx.shape[1]
    for ky in range(k):
        row = torch.zeros_like(out)
        for kx in range(k):
            vals = gather(ix + first + kx, iy + first + ky).to(wdt)
            row += vals * wx[:, kx].view(1, -1, 1)
        out += row * wy[:, ky].view(1, -1, 1)
    return saturate(out, x.dtype).reshape(n, dh, dw, c)


def _warp(
    src: torch.Tensor,
    m: np.ndarray,
    dsize: Any,
    dst: Any,
    flags: int,
    border_mode: int,
    border_value: Any,
    perspective: bool,
) -> torch.Tensor:
    check_image(src, dtypes=(torch.uint8, torch.float32, torch.float64))
    if dst is not None:
        raise UnsupportedOperation("warp: an output array dst is not supported")
    mode, inverse = _parse_flags(flags)
    if mode == INTER_CUBIC and src.dtype == torch.float64:
        raise UnsupportedOperation("warp: INTER_CUBIC on float64 is not reproduced (cv2 5 differs)")
    border = border_type_base(border_mode, _BORDERS)
    dw, dh = (int(v) for v in dsize)
    if dw <= 0 or dh <= 0:
        dw, dh = int(src.shape[2]), int(src.shape[1])
    if not inverse:
        m = np.linalg.inv(m) if perspective else _invert_affine(m)
    if mode == INTER_LANCZOS4 or src.dtype == torch.float64:
        coords = _perspective_coords if perspective else _affine_coords
        xs, ys = coords(m, dw, dh, mode == INTER_NEAREST, src.device)
    else:
        xs, ys = _float_coords(m, dw, dh, perspective, src.device)
        if mode == INTER_NEAREST:
            xs, ys = torch.round(xs).long(), torch.round(ys).long()
    cval = scalar_values(border_value, channels(src))
    out = _remap(as_nhwc(src), xs, ys, dw, dh, mode, border, cval)
    return like_input(out, src)


def warpAffine(
    src: torch.Tensor,
    M: Any,
    dsize: Any,
    dst: Any = None,
    flags: int = INTER_LINEAR,
    borderMode: int = BORDER_CONSTANT,
    borderValue: Any = None,
    hint: Any = None,
) -> torch.Tensor:
    """``cv2.warpAffine`` for a batch with one 2x3 matrix (forward, or inverse with
    WARP_INVERSE_MAP); nearest/linear/cubic/lanczos4; BORDER_TRANSPARENT is unsupported."""
    m = to_numpy_matrix(M, (2, 3), "warpAffine: M")
    return _warp(src, m, dsize, dst, flags, borderMode, borderValue, perspective=False)


def warpPerspective(
    src: torch.Tensor,
    M: Any,
    dsize: Any,
    dst: Any = None,
    flags: int = INTER_LINEAR,
    borderMode: int = BORDER_CONSTANT,
    borderValue: Any = None,
    hint: Any = None,
) -> torch.Tensor:
    """``cv2.warpPerspective`` for a batch with one 3x3 matrix; same modes as warpAffine."""
    m = to_numpy_matrix(M, (3, 3), "warpPerspective: M")
    return _warp(src, m, dsize, dst, flags, borderMode, borderValue, perspective=True)


_WARP = frozenset({"uint8", "float32", "float64"})
OPS = [
    op("cv2.warpAffine", warpAffine, dtypes=_WARP, fidelity=Fidelity.TOLERANCE),
    op("cv2.warpPerspective", warpPerspective, dtypes=_WARP, fidelity=Fidelity.TOLERANCE),
]

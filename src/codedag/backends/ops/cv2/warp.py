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

import math
from functools import lru_cache
from typing import Any

import numpy as np
import torch

import codedag.backends.ops.cv2._warp_fast as _warp_fast
from codedag.backends.contract import MAX_OUTPUT_VALUES, Tolerance
from codedag.backends.host_sync import host_sync_allowed
from codedag.backends.ops.cv2._adapter import op
from codedag.backends.ops.cv2._common import (
    BORDER_CONSTANT,
    as_nhwc,
    border_reason,
    border_type_base,
    channels,
    channels_of,
    check_image,
    finite,
    int_pair,
    is_int,
    like_input,
    saturate,
    scalar_reason,
    scalar_values,
    to_numpy_matrix,
    torch_border,
)
from codedag.backends.ops.cv2._warp_coords import f32_coords
from codedag.backends.ops.cv2.resize import _cubic_coeffs, _lanczos4_coeffs
from codedag.errors import UnsupportedOperation

INTER_NEAREST, INTER_LINEAR, INTER_CUBIC, INTER_AREA, INTER_LANCZOS4 = 0, 1, 2, 3, 4
WARP_INVERSE_MAP = 16
_AB_BITS, _INTER_BITS = 10, 5
_TAB = 1 << _INTER_BITS


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
    """cv2's ``invertAffineTransform`` of (..., 2, 3) float64 matrices (zeros where singular)."""
    d = m[..., 0, 0] * m[..., 1, 1] - m[..., 0, 1] * m[..., 1, 0]
    d = np.divide(1.0, d, out=np.zeros_like(d), where=d != 0)
    a11, a22, a12, a21 = m[..., 1, 1] * d, m[..., 0, 0] * d, -m[..., 0, 1] * d, -m[..., 1, 0] * d
    b1 = -a11 * m[..., 0, 2] - a12 * m[..., 1, 2]
    b2 = -a21 * m[..., 0, 2] - a22 * m[..., 1, 2]
    return np.stack([np.stack([a11, a12, b1], -1), np.stack([a21, a22, b2], -1)], -2)


def _invert_affine_device(m: torch.Tensor) -> torch.Tensor:
    """:func:`_invert_affine` of (B, 2, 3) float64 matrices on their device: the same float64
    products, sums and negations (a negation is exact, so ``(-a) * b`` is ``a * (-b)``), so the
    same bits, in few ops: every operand is one gather of the matrices' elements."""
    b = m.shape[0]
    index, signs, zero = _inverse_constants(b, m.device)
    adj, t, pairs = (m.take(index) * signs).split((2, 1, 2), 1)
    first, second = pairs.prod(1, keepdim=True).split(1, 2)  # m00 * m11, m01 * m10
    d = first - second
    d = torch.where(d != 0, d.reciprocal(), zero)
    a = adj * d
    first, second = (a * t).split(1, 2)  # -(a_i0 * m02), a_i1 * m12
    return torch.cat([a, first - second], 2)


@lru_cache(maxsize=16)
def _inverse_constants(
    b: int, dev: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Flat indices into (B, 2, 3) matrices and their signs, (B, 5, 2): the adjugate's rows
    (m11, -m01) and (-m10, m00), then (-m02, m12), then the determinant's factors (m00, m01)
    and (m11, m10); and a float64 zero."""
    order = torch.tensor([[4, 1], [3, 0], [2, 5], [0, 1], [4, 3]], device=dev)
    index = order + 6 * torch.arange(b, device=dev).view(b, 1, 1)
    signs = torch.tensor(
        [[1.0, -1.0], [-1.0, 1.0], [-1.0, 1.0], [1.0, 1.0], [1.0, 1.0]],
        dtype=torch.float64,
        device=dev,
    )
    return index, signs, torch.zeros((), dtype=torch.float64, device=dev)


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
    """Source coordinates (integer, or in 1/32 pixel) of every destination pixel, as cv2's: in
    blocks of at most 1024 pixels, 16 rows high, each row of a block from its first column
    ``xb`` (``X0 = M0 * xb + M1 * y + M2``, then ``X0 + M0 * x1``, x1 = x - xb), in float64."""
    f64 = torch.float64
    bw = min(1024 // min(16, dh), dw)
    col = torch.arange(dw, dtype=f64, device=dev)[None, :]
    xb = torch.div(col, bw, rounding_mode="floor") * bw
    x1 = col - xb
    y = torch.arange(dh, dtype=f64, device=dev)[:, None]
    xw = (m[0, 0] * xb + m[0, 1] * y + m[0, 2]) + m[0, 0] * x1
    yw = (m[1, 0] * xb + m[1, 1] * y + m[1, 2]) + m[1, 0] * x1
    w = (m[2, 0] * xb + m[2, 1] * y + m[2, 2]) + m[2, 0] * x1
    num = 1.0 if nearest else float(_TAB)
    w = torch.where(w != 0, num / torch.where(w != 0, w, torch.ones_like(w)), torch.zeros_like(w))
    lim = float(2**31 - 1)
    xs = torch.round((xw * w).clamp(-lim - 1, lim)).long()
    ys = torch.round((yw * w).clamp(-lim - 1, lim)).long()
    return xs.reshape(-1), ys.reshape(-1)


@lru_cache(maxsize=3)
def _itab(mode: int) -> np.ndarray:
    """cv2's 2-D fixed-point interpolation table (``initInterTab2D``): (32*32, k*k) int32 weights
    summing to 2**15, k = 2 (linear), 4 (cubic) or 8 (lanczos4).

    Products of the 1-D float32 weights are rounded; a sum off 2**15 is corrected on the largest
    (or smallest) of the four central weights. For k = 2 cv2's search of those four reads past
    the 2x2 table (into the next table, still zero), so a positive excess is never corrected and
    a deficit goes to the last weight.
    """
    grid = np.arange(_TAB, dtype=np.float32) / _TAB
    if mode == INTER_LINEAR:
        tab1 = np.stack([1 - grid, grid], axis=1).astype(np.float32)
    elif mode == INTER_CUBIC:
        tab1 = _cubic_coeffs(grid).astype(np.float32)
    else:
        tab1 = _lanczos4_coeffs(grid).astype(np.float32)
    k = tab1.shape[1]
    out = np.zeros((_TAB * _TAB, k * k), dtype=np.int64)
    for i in range(_TAB):
        for j in range(_TAB):
            v = (tab1[i][:, None] * tab1[j][None, :]).astype(np.float32)  # (y taps, x taps)
            itab = np.rint(v.astype(np.float64) * 32768).astype(np.int64)
            diff = int(itab.sum()) - 32768
            if diff and k == 2:
                if diff < 0:
                    itab[1, 1] -= diff
            elif diff:
                mk = big = (k // 2, k // 2)
                for k1 in (k // 2, k // 2 + 1):
                    for k2 in (k // 2, k // 2 + 1):
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
    return torch.stack([c0, c1, c2, 1 - c0 - c1 - c2], dim=-1)


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
        w = torch.stack([1 - f, f], dim=-1)
        return base.long(), 0, w.to(torch.float64)
    return base.long(), -1, _cubic_torch(f).to(torch.float64)


def _gather_fn(x: torch.Tensor, border: int, fill: torch.Tensor):
    """Pixels at integer coordinates (B, P), B 1 or N, with cv2's border rules per tap."""
    n, h, w, c = x.shape
    flat = x.reshape(n, h * w, c)

    def gather(ix: torch.Tensor, iy: torch.Tensor) -> torch.Tensor:
        bx, by = torch_border(ix, w, border), torch_border(iy, h, border)
        ok = (bx >= 0) & (by >= 0)
        idx = torch.where(ok, by * w + bx, torch.zeros_like(bx))
        if idx.shape[0] == 1:
            vals = flat.index_select(1, idx[0])
        else:
            vals = torch.gather(flat, 1, idx.unsqueeze(-1).expand(n, idx.shape[1], c))
        if border == BORDER_CONSTANT and (not host_sync_allowed() or not bool(ok.all())):
            vals = torch.where(ok.unsqueeze(-1), vals, fill.to(vals.dtype).view(1, 1, c))
        return vals

    return gather


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
    """cv2's remap of the old warp code: coordinates (B, P), integer (nearest) or in 1/32 pixel
    (fixed point), or float (cubic), B 1 (one map) or N (one per sample)."""
    n, h, w, c = x.shape
    fill = saturate(torch.tensor(cval, dtype=torch.float64), x.dtype).to(x.device)
    gather = _gather_fn(x, border, fill)
    if mode == INTER_NEAREST:
        return gather(xs, ys).reshape(n, dh, dw, c)
    fixed = xs.dtype == torch.int64
    if fixed and x.dtype == torch.uint8:
        # cv2's integer path: 15-bit 2-D weights from its table, rounding half up.
        k = {INTER_LINEAR: 2, INTER_CUBIC: 4, INTER_LANCZOS4: 8}[mode]
        table = torch.as_tensor(_itab(mode), device=x.device)
        weights = table[(ys & (_TAB - 1)) * _TAB + (xs & (_TAB - 1))]  # (B, P, k*k)
        first = (k - 1) // 2
        ix, iy = (xs >> _INTER_BITS) - first, (ys >> _INTER_BITS) - first
        acc = torch.zeros((n, ix.shape[1], c), dtype=torch.int32, device=x.device)
        for ky in range(k):
            for kx in range(k):
                vals = gather(ix + kx, iy + ky).to(torch.int32)
                acc += vals * weights[..., ky * k + kx].unsqueeze(-1)
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
    out = torch.zeros((n, ix.shape[1], c), dtype=wdt, device=x.device)
    k = wx.shape[-1]
    for ky in range(k):
        row = torch.zeros_like(out)
        for kx in range(k):
            vals = gather(ix + first + kx, iy + first + ky).to(wdt)
            row += vals * wx[..., kx].unsqueeze(-1)
        out += row * wy[..., ky].unsqueeze(-1)
    return saturate(out, x.dtype).reshape(n, dh, dw, c)


# -- cv2 5's warp kernels: uint8 and float32 images of 1, 3 or 4 channels, nearest and linear --


def _to_int(v: torch.Tensor, how: str) -> torch.Tensor:
    """``v_round``/``v_floor`` of float32 coordinates: NaN, inf and values beyond int32 become
    INT_MIN (the x86 conversion's "integer indefinite"), i.e. a pixel far outside."""
    r = torch.round(v) if how == "round" else torch.floor(v)
    ok = torch.isfinite(r) & (r >= -(2.0**31)) & (r <= 2.0**31 - 1)
    return torch.where(ok, r, torch.full_like(r, -(2.0**31))).long()


def _remap_f32(
    x: torch.Tensor, coords: torch.Tensor, mode: int, border: int, cval: list[float]
) -> torch.Tensor:
    """cv2 5's nearest/linear warp kernels: rounded coordinates, or ``fma`` lerps in float32
    (``v0 = fma(a, p01 - p00, p00)``, ...) rounded half to even for uint8; with a constant border
    a pixel whose 2x2 neighbourhood lies wholly outside gets the border value."""
    _n, h, w, c = x.shape
    if mode == INTER_LINEAR and not host_sync_allowed():  # coordinates bounded by the check
        return _warp_fast.remap_device(x, coords, border, cval)
    fill = saturate(torch.tensor(cval, dtype=torch.float64), x.dtype).to(x.device)
    gather = _gather_fn(x, border, fill)  # a 1-pixel side: every border mode replicates
    sx, sy = coords.unbind(1)
    if mode == INTER_NEAREST:
        return gather(_to_int(sx, "round"), _to_int(sy, "round"))
    fast = _warp_fast.remap_linear(x, coords, border, cval)
    if fast is not None:
        return fast
    ix, iy = _to_int(sx, "floor"), _to_int(sy, "floor")
    ax = (sx - ix.float()).unsqueeze(-1).double()
    ay = (sy - iy.float()).unsqueeze(-1).double()

    def lerp(p0: torch.Tensor, p1: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        return (a * (p1 - p0).double() + p0.double()).float()  # fma(a, p1 - p0, p0) in float32

    p = [gather(ix + dx, iy + dy).float() for dy in (0, 1) for dx in (0, 1)]
    v0, v1 = lerp(p[0], p[1], ax), lerp(p[2], p[3], ax)
    out = lerp(v0, v1, ay)
    if border == BORDER_CONSTANT:
        outside = (ix < -1) | (ix >= w) | (iy < -1) | (iy >= h)
        out = torch.where(outside.unsqueeze(-1), fill.float().view(1, 1, c), out)
    return saturate(out, x.dtype)


def _warp(
    src: torch.Tensor,
    m: np.ndarray | torch.Tensor,
    dsize: Any,
    dst: Any,
    flags: int,
    border_mode: int,
    border_value: Any,
    perspective: bool,
) -> torch.Tensor:
    """Warp with one matrix (``m`` of shape (1, 2|3, 3)) or one per sample ((N, 2|3, 3))."""
    check_image(src, dtypes=(torch.uint8, torch.float32, torch.float64))
    if dst is not None:
        raise UnsupportedOperation("warp: an output array dst is not supported")
    mode, inverse = _parse_flags(flags)
    border = border_type_base(border_mode)
    dw, dh = (int(v) for v in dsize)
    if dw <= 0 or dh <= 0:
        dw, dh = int(src.shape[2]), int(src.shape[1])
    kernels = uses_warp_kernels(src.dtype, channels(src), mode)
    if isinstance(m, torch.Tensor) and (perspective or not kernels):
        m = m.cpu().numpy()  # only the affine warp kernels take matrices on the device
    if isinstance(m, torch.Tensor):
        m = m if inverse else _invert_affine_device(m)
    else:
        if not inverse:
            m = np.stack([invert3(a) for a in m]) if perspective else _invert_affine(m)
        if len(m) > 1 and (m == m[:1]).all():
            m = m[:1]  # one matrix for the whole batch: its coordinates once
    x = as_nhwc(src)
    cval = scalar_values(border_value, channels(src))
    if kernels:
        coords = f32_coords(m, dw, dh, perspective, src.device)
        out = _remap_f32(x, coords, mode, border, cval).reshape(x.shape[0], dh, dw, -1)
    elif mode != INTER_CUBIC or src.dtype == torch.float64:
        fixed_coords = _perspective_coords if perspective else _affine_coords
        pairs = [fixed_coords(a, dw, dh, mode == INTER_NEAREST, src.device) for a in m]
        xs, ys = torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])
        out = _remap(x, xs, ys, dw, dh, mode, border, cval)
    else:
        pairs = [_float_coords(a, dw, dh, perspective, src.device) for a in m]
        xs, ys = torch.stack([p[0] for p in pairs]), torch.stack([p[1] for p in pairs])
        out = _remap(x, xs, ys, dw, dh, mode, border, cval)
    return like_input(out, src)


def uses_warp_kernels(dtype: torch.dtype, cn: int, mode: int) -> bool:
    """Whether cv2 5 runs this warp through its float32 warp kernels (nearest and linear on
    uint8 and float32 images of 1, 3 or 4 channels) rather than the fixed-point remap."""
    return dtype in (torch.uint8, torch.float32) and cn in (1, 3, 4) and mode in (0, 1)


def invert3(m: np.ndarray) -> np.ndarray:
    """cv2's ``invert`` of a 3x3 float64 matrix: cofactors over the determinant, zeros when the
    determinant is 0 (cv2 warps with the zero matrix then)."""
    s = np.asarray(m, dtype=np.float64)
    d = (
        s[0, 0] * (s[1, 1] * s[2, 2] - s[1, 2] * s[2, 1])
        - s[0, 1] * (s[1, 0] * s[2, 2] - s[1, 2] * s[2, 0])
        + s[0, 2] * (s[1, 0] * s[2, 1] - s[1, 1] * s[2, 0])
    )
    if d == 0:
        return np.zeros((3, 3))
    d = 1.0 / d
    return np.array(
        [
            [
                (s[1, 1] * s[2, 2] - s[1, 2] * s[2, 1]) * d,
                (s[0, 2] * s[2, 1] - s[0, 1] * s[2, 2]) * d,
                (s[0, 1] * s[1, 2] - s[0, 2] * s[1, 1]) * d,
            ],
            [
                (s[1, 2] * s[2, 0] - s[1, 0] * s[2, 2]) * d,
                (s[0, 0] * s[2, 2] - s[0, 2] * s[2, 0]) * d,
                (s[0, 2] * s[1, 0] - s[0, 0] * s[1, 2]) * d,
            ],
            [
                (s[1, 0] * s[2, 1] - s[1, 1] * s[2, 0]) * d,
                (s[0, 1] * s[2, 0] - s[0, 0] * s[2, 1]) * d,
                (s[0, 0] * s[1, 1] - s[0, 1] * s[1, 0]) * d,
            ],
        ]
    )


def _matrices(m: object, rows: int, name: str) -> np.ndarray | torch.Tensor:
    """One (rows, 3) matrix, or one per sample ((N, rows, 3) tensor), as float64 (B, rows, 3):
    per-sample matrices stay a tensor on their device where host reads are not allowed."""
    if isinstance(m, torch.Tensor) and m.dim() == 3:
        if tuple(m.shape[1:]) != (rows, 3):
            raise UnsupportedOperation(f"{name}: per-sample matrices of shape {tuple(m.shape)}")
        if not host_sync_allowed():
            return (m.detach() if m.requires_grad else m).to(torch.float64)
        return m.detach().cpu().double().numpy()
    return to_numpy_matrix(m, (rows, 3), name)[None]


def warpAffine(
    src: torch.Tensor,
    M: object,
    dsize: object,
    dst: object = None,
    flags: int = INTER_LINEAR,
    borderMode: int = BORDER_CONSTANT,
    borderValue: object = None,
    hint: object = None,
) -> torch.Tensor:
    """``cv2.warpAffine`` for a batch with one 2x3 matrix (forward, or inverse with
    WARP_INVERSE_MAP); nearest/linear/cubic/lanczos4; BORDER_TRANSPARENT is unsupported."""
    m = _matrices(M, 2, "warpAffine: M")
    return _warp(src, m, dsize, dst, flags, borderMode, borderValue, perspective=False)


def warpPerspective(
    src: torch.Tensor,
    M: object,
    dsize: object,
    dst: object = None,
    flags: int = INTER_LINEAR,
    borderMode: int = BORDER_CONSTANT,
    borderValue: object = None,
    hint: object = None,
) -> torch.Tensor:
    """``cv2.warpPerspective`` for a batch with one 3x3 matrix; same modes as warpAffine."""
    m = _matrices(M, 3, "warpPerspective: M")
    return _warp(src, m, dsize, dst, flags, borderMode, borderValue, perspective=True)


# -- declared check ----------------------------------------------------------------------------


def _check_warp(
    src: Any, m: Any, rows: int, dsize: Any, flags: Any, border: Any, value: Any, hint: Any
) -> str | None:
    # cv2 takes M as a float32 or float64 array only: a list, a tuple or integers raise there
    arr = m if isinstance(m, np.ndarray) else None
    if arr is None or arr.dtype not in (np.float32, np.float64) or arr.shape != (rows, 3):
        return (
            f"M: cv2 expects a {rows}x3 float32 or float64 array, got {type(m).__name__} "
            f"{getattr(m, 'dtype', '')} {getattr(m, 'shape', '')}"
        )
    if not all(map(math.isfinite, arr.flat)):  # 6 or 9 values: no NumPy reduction
        return "M holds NaN or inf"
    size = int_pair(dsize)
    if size is None:
        return f"dsize {dsize!r} is not a pair of integers"
    dw, dh = size if min(size) > 0 else (int(src.shape[1]), int(src.shape[0]))
    if dw * dh * channels_of(src) > MAX_OUTPUT_VALUES:
        return f"output {dw}x{dh} beyond {MAX_OUTPUT_VALUES} values"
    if not is_int(flags) or int(flags) & ~(7 | WARP_INVERSE_MAP) or int(flags) & 7 > 4:
        return f"flags {flags!r}: interpolation 0..4, optionally | WARP_INVERSE_MAP"
    if _far_corner(arr, dw, dh, bool(int(flags) & WARP_INVERSE_MAP)):
        return f"source coordinates beyond {MAX_COORDINATE:g} pixels"
    mode = int(flags) & 7
    if mode == INTER_CUBIC and src.dtype == np.float64:
        return "INTER_CUBIC on float64 is not reproduced"
    if hint not in (None, 0):
        return f"hint {hint!r}: only the default algorithm is reproduced"
    if mode in (INTER_CUBIC, INTER_LANCZOS4) and channels_of(src) > 4:
        return "cubic or lanczos4 on more than 4 channels (cv2's remap raises)"
    if mode in (INTER_CUBIC, INTER_LANCZOS4) and not finite(src):
        return "non-finite values with cubic or lanczos4 taps"
    return border_reason(border) or scalar_reason(value)


MAX_COORDINATE = 2.0**28
"""Warps whose source coordinates reach beyond this are refused: the backends' paths that
decide on the device (no host reads) take every coordinate to be finite and this small."""


def _far_corner(m: np.ndarray, dw: int, dh: int, inverse: bool) -> bool:
    """Whether a corner of the output maps beyond :data:`MAX_COORDINATE` (or to no finite
    point). An affine map reaches its extremes at the corners, and so does a perspective
    whose horizon does not cross the output (the image of the rectangle is convex); plain
    Python on 6 or 9 numbers, as recording checks every call."""
    rows = len(m)
    if inverse:
        a = [[float(v) for v in row] for row in m]
    elif rows == 3:
        a = invert3(m).tolist()
    else:
        (m00, m01, m02), (m10, m11, m12) = ([float(v) for v in row] for row in m)
        d = m00 * m11 - m01 * m10
        d = 1.0 / d if d != 0 else 0.0
        a11, a22, a12, a21 = m11 * d, m00 * d, -m01 * d, -m10 * d
        a = [[a11, a12, -a11 * m02 - a12 * m12], [a21, a22, -a21 * m02 - a22 * m12]]
    for x, y in ((0, 0), (dw - 1, 0), (0, dh - 1), (dw - 1, dh - 1)):
        xs = a[0][0] * x + a[0][1] * y + a[0][2]
        ys = a[1][0] * x + a[1][1] * y + a[1][2]
        if rows == 3:
            w = a[2][0] * x + a[2][1] * y + a[2][2]
            if w == 0:
                continue  # the horizon: refused by the perspective's own check
            xs, ys = xs / w, ys / w
        if not (abs(xs) < MAX_COORDINATE and abs(ys) < MAX_COORDINATE):
            return True
    return False


def check_warp_affine(
    src: object,
    M: object,
    dsize: object,
    dst: object = None,
    flags: object = INTER_LINEAR,
    borderMode: object = BORDER_CONSTANT,
    borderValue: object = None,
    hint: object = None,
) -> str | None:
    """A finite 2x3 matrix, a size, interpolation 0..4 (| inverse), a border cv2 reproduces."""
    return _check_warp(src, M, 2, dsize, flags, borderMode, borderValue, hint)


def check_warp_perspective(
    src: object,
    M: object,
    dsize: object,
    dst: object = None,
    flags: object = INTER_LINEAR,
    borderMode: object = BORDER_CONSTANT,
    borderValue: object = None,
    hint: object = None,
) -> str | None:
    """As warpAffine with a 3x3 matrix (singular ones included: cv2 then warps with zeros), whose
    horizon does not cross the output: where the inverse map's third row is 0 the coordinates
    are infinite or NaN, and which of those pixels cv2 fills and which become NaN depends on its
    SIMD blocks, not reproduced."""
    reason = _check_warp(src, M, 3, dsize, flags, borderMode, borderValue, hint)
    if reason is None:
        reason = _horizon_reason(np.asarray(M, dtype=np.float64), dsize, flags, src)
    return reason


def _horizon_reason(m: np.ndarray, dsize: Any, flags: Any, src: Any) -> str | None:
    inverse = m if int(flags) & WARP_INVERSE_MAP else invert3(m)
    if not inverse.any():
        return None  # singular: every coordinate is NaN and every pixel the border value
    size = int_pair(dsize) or (0, 0)
    dw, dh = size if min(size) > 0 else (int(src.shape[1]), int(src.shape[0]))
    corners = np.array([[0, 0, 1], [dw - 1, 0, 1], [0, dh - 1, 1], [dw - 1, dh - 1, 1]])
    w = corners @ inverse[2]
    if w.min() <= 0 <= w.max():
        return "the perspective's horizon crosses the output (infinite and NaN coordinates)"
    return None


_WARP_MODES = (
    "forward or `WARP_INVERSE_MAP`; NEAREST, LINEAR, CUBIC (not on float64), AREA (= LINEAR as in "
    "cv2), LANCZOS4; borders constant (Scalar value), replicate, reflect, reflect101, wrap"
)
_WARP = frozenset({"uint8", "float32", "float64"})
_WARP_TOLERANCE = Tolerance(
    atol=5e-2,
    rtol=1e-5,
    max_mismatch_frac=0.02,
    mismatch_atol=1.0,
    note="nearest and linear bit-exact on uint8 and float32 (cv2 5's float32 warp kernels for 1, "
    "3 and 4 channels, SIMD and scalar coordinates per column; its fixed-point remap otherwise), "
    "uint8 lanczos4 exact; float cubic within 2e-2 on 0..255; uint8 cubic ~0.05% of pixels off "
    "by 1",
)
"""Both warps: the same sampling and the same rounding."""
OPS = [
    op(
        f"cv2.{backend.__name__}",
        backend,
        reproduces=_WARP_MODES,
        check=check,
        dtypes=_WARP,
        per_sample={"M": f"[N,{rows},3]"},
        tolerance=_WARP_TOLERANCE,
    )
    for backend, check, rows in (
        (warpAffine, check_warp_affine, 2),
        (warpPerspective, check_warp_perspective, 3),
    )
]

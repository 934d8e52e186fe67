"""``cv2.cvtColor`` on torch, batch-first: BGR/RGB(A) swaps, GRAY, YCrCb, YUV, XYZ, HSV, HLS, Lab.

Our own torch code rather than kornia's color module: kornia's float gray, YCbCr and HSV match cv2's
float results (hue in radians; measured), but it has no uint8 path (cv2's fixed-point integer
arithmetic, HSV's division tables, H in 0..180), works on NCHW RGB, and one implementation for both
dtypes is simpler to keep exact. uint8 YCrCb, YUV, XYZ and BGR->HSV reproduce cv2's integer
arithmetic (14/12-bit fixed point, HSV's division tables) bit for bit. GRAY is computed in float
(cv2 5's SIMD gray differs from its documented 14-bit formula in ~0.2% of pixels by 1, float in
~0.1%); uint8 HSV->BGR and HLS go through float as cv2 does (within 1 level). Float hue is in
degrees, as in cv2; cv2 5 uses 255 as the uint8 "full" hue range except in BGR->HSV_FULL (256).

Left in cv2 (UnsupportedOperation): BGR/RGB->Lab (cv2 5 interpolates quantized tables: float results
up to 0.3 L units, uint8 up to 2 levels from the CIE formulas), uint8 Lab->BGR and uint8 HLS_FULL
(up to 2 levels / 20% of values off); Lab->BGR/RGB for float32 uses the CIE formulas. Supported
dtypes: uint8 and float32 (cv2 itself has no float64 color conversion).
"""

from __future__ import annotations

from typing import Any

import torch

from codedag.errors import UnsupportedOperation
from codedag.migrate.contract import Fidelity
from codedag.migrate.ops.cv2._adapter import op
from codedag.migrate.ops.cv2._common import as_nhwc, channels, check_image, saturate

_SWAPS = {0: (4, False), 1: (3, False), 2: (4, True), 3: (3, True), 4: (3, True), 5: (4, True)}
_TO_GRAY = {6: 0, 7: 2, 10: 0, 11: 2}
_FROM_GRAY = {8: 3, 9: 4}
# code -> (family, blue index, hue range or 0)
_FORWARD = {
    32: ("xyz", 0, 0), 33: ("xyz", 2, 0), 36: ("ycrcb", 0, 0), 37: ("ycrcb", 2, 0),
    82: ("yuv", 0, 0), 83: ("yuv", 2, 0), 40: ("hsv", 0, 180), 41: ("hsv", 2, 180),
    66: ("hsv", 0, 256), 67: ("hsv", 2, 256), 52: ("hls", 0, 180), 53: ("hls", 2, 180),
    68: ("hls", 0, 256), 69: ("hls", 2, 256),
}  # fmt: skip
_INVERSE = {
    34: ("xyz", 0, 0), 35: ("xyz", 2, 0), 38: ("ycrcb", 0, 0), 39: ("ycrcb", 2, 0),
    84: ("yuv", 0, 0), 85: ("yuv", 2, 0), 54: ("hsv", 0, 180), 55: ("hsv", 2, 180),
    70: ("hsv", 0, 256), 71: ("hsv", 2, 256), 60: ("hls", 0, 180), 61: ("hls", 2, 180),
    72: ("hls", 0, 256), 73: ("hls", 2, 256), 56: ("lab", 0, 0), 57: ("lab", 2, 0),
}  # fmt: skip
# uint8 conversions cv2 5 computes through paths we do not reproduce within 1 level.
_U8_UNSUPPORTED = frozenset({56, 57, 68, 69, 72, 73})  # Lab->BGR/RGB, HLS_FULL both ways
SUPPORTED_CODES = (
    frozenset(_SWAPS) | set(_TO_GRAY) | set(_FROM_GRAY) | set(_FORWARD) | set(_INVERSE)
)

_SHIFT = 14
_R2Y, _G2Y, _B2Y = 4899, 9617, 1868
_XYZ = ((0.412453, 0.357580, 0.180423), (0.212671, 0.715160, 0.072169),
        (0.019334, 0.119193, 0.950227))  # fmt: skip
_XYZ_INV = ((3.240479, -1.53715, -0.498535), (-0.969256, 1.875991, 0.041556),
            (0.055648, -0.204043, 1.057311))  # fmt: skip


def _max_value(dtype: torch.dtype) -> float:
    return 255.0 if dtype == torch.uint8 else 1.0


def _descale(x: torch.Tensor, n: int) -> torch.Tensor:
    return (x + (1 << (n - 1))) >> n


def _swap(x: torch.Tensor, dcn: int, swapb: bool) -> torch.Tensor:
    chans = [x[..., 2], x[..., 1], x[..., 0]] if swapb else [x[..., 0], x[..., 1], x[..., 2]]
    if dcn == 4:
        alpha = x[..., 3] if x.shape[-1] == 4 else torch.full_like(x[..., 0], _max_value(x.dtype))
        chans.append(alpha)
    return torch.stack(chans, dim=-1)


def _to_gray(x: torch.Tensor, bidx: int) -> torch.Tensor:
    b, g, r = x[..., bidx], x[..., 1], x[..., 2 - bidx]
    y = b.float() * 0.114 + g.float() * 0.587 + r.float() * 0.299
    return saturate(y, x.dtype)


def _ycc(x: torch.Tensor, bidx: int, yuv: bool) -> torch.Tensor:
    b, g, r = x[..., bidx], x[..., 1], x[..., 2 - bidx]
    if x.dtype == torch.uint8:
        b, g, r = b.int(), g.int(), r.int()
        y = _descale(b * _B2Y + g * _G2Y + r * _R2Y, _SHIFT)
        cr_c, cb_c = (14369, 8061) if yuv else (11682, 9241)
        delta = 128 << _SHIFT
        cr = _descale((r - y) * cr_c + delta, _SHIFT)
        cb = _descale((b - y) * cb_c + delta, _SHIFT)
        out = torch.stack([y, cb, cr] if yuv else [y, cr, cb], dim=-1)
        return out.clamp(0, 255).to(torch.uint8)
    y = b * 0.114 + g * 0.587 + r * 0.299
    cr_f, cb_f = (0.877, 0.492) if yuv else (0.713, 0.564)
    cr = (r - y) * cr_f + 0.5
    cb = (b - y) * cb_f + 0.5
    return torch.stack([y, cb, cr] if yuv else [y, cr, cb], dim=-1)


def _ycc_inv(x: torch.Tensor, bidx: int, yuv: bool) -> torch.Tensor:
    if yuv:
        y, cb, cr = x[..., 0], x[..., 1], x[..., 2]
        ci, cf = (33292, -6472, -9519, 18678), (2.032, -0.395, -0.581, 1.140)
    else:
        y, cr, cb = x[..., 0], x[..., 1], x[..., 2]
        ci, cf = (29049, -5636, -11698, 22987), (1.773, -0.344, -0.714, 1.403)
    if x.dtype == torch.uint8:
        y, cb, cr = y.int(), cb.int() - 128, cr.int() - 128
        b = y + _descale(cb * ci[0], _SHIFT)
        g = y + _descale(cb * ci[1] + cr * ci[2], _SHIFT)
        r = y + _descale(cr * ci[3], _SHIFT)
    else:
        cb, cr = cb - 0.5, cr - 0.5
        b = y + cb * cf[0]
        g = y + cb * cf[1] + cr * cf[2]
        r = y + cr * cf[3]
    out = torch.stack([b, g, r] if bidx == 0 else [r, g, b], dim=-1)
    return saturate(out, x.dtype)


def _matrix(x: torch.Tensor, bidx: int, mat: tuple, inverse: bool) -> torch.Tensor:
    if inverse:
        src = [x[..., 0], x[..., 1], x[..., 2]]
    else:
        src = [x[..., 2 - bidx], x[..., 1], x[..., bidx]]  # r, g, b
    if x.dtype == torch.uint8:
        shift = 12
        ints = [[round(c * (1 << shift)) for c in row] for row in mat]
        s = [v.int() for v in src]
        rows = [_descale(s[0] * r[0] + s[1] * r[1] + s[2] * r[2], shift) for r in ints]
    else:
        rows = [src[0] * r[0] + src[1] * r[1] + src[2] * r[2] for r in mat]
    if inverse and bidx == 0:
        rows = rows[::-1]  # r, g, b -> b, g, r
    return saturate(torch.stack(rows, dim=-1), x.dtype)


def _hsv_u8(x: torch.Tensor, bidx: int, hrange: int) -> torch.Tensor:
    b, g, r = x[..., bidx].int(), x[..., 1].int(), x[..., 2 - bidx].int()
    v = torch.maximum(torch.maximum(b, g), r)
    diff = v - torch.minimum(torch.minimum(b, g), r)
    i = torch.arange(256, dtype=torch.float64, device=x.device)
    safe = torch.where(i == 0, torch.ones_like(i), i)
    sdiv = torch.where(i == 0, 0, torch.round((255 << 12) / safe)).int()
    hdiv = torch.where(i == 0, 0, torch.round((hrange << 12) / (6.0 * safe))).int()
    s = _descale(diff * sdiv[v.long()], 12)
    h = torch.where(
        v == r, g - b, torch.where(v == g, b - r + 2 * diff, r - g + 4 * diff)
    )  # cv2 tests r first, then g
    h = _descale(h * hdiv[diff.long()], 12)
    h = torch.where(h < 0, h + hrange, h)
    return torch.stack([h, s, v], dim=-1).clamp(0, 255).to(torch.uint8)


def _hsv_hls_f(x: torch.Tensor, bidx: int, hrange: int, hls: bool) -> torch.Tensor:
    b, g, r = x[..., bidx], x[..., 1], x[..., 2 - bidx]
    eps = torch.finfo(torch.float32).eps
    vmax = torch.maximum(torch.maximum(b, g), r)
    vmin = torch.minimum(torch.minimum(b, g), r)
    diff = vmax - vmin
    if hls:
        lum = (vmax + vmin) * 0.5
        has = diff > eps
        s = torch.where(lum < 0.5, diff / (vmax + vmin), diff / (2 - vmax - vmin))
        s = torch.where(has, s, torch.zeros_like(s))
        scale = torch.where(has, 60.0 / torch.where(has, diff, torch.ones_like(diff)), 0.0)
    else:
        s = diff / (vmax.abs() + eps)
        scale = 60.0 / (diff + eps)
    h = torch.where(
        vmax == r,
        (g - b) * scale,
        torch.where(vmax == g, (b - r) * scale + 120, (r - g) * scale + 240),
    )
    h = torch.where(h < 0, h + 360, h)
    if hls:
        h = torch.where(has, h, torch.zeros_like(h))
    h = h * (hrange / 360.0)
    return torch.stack([h, lum, s] if hls else [h, s, vmax], dim=-1)


def _hsv_hls_inv_f(x: torch.Tensor, bidx: int, hrange: int, hls: bool) -> torch.Tensor:
    if hls:
        h, lum, s = x[..., 0], x[..., 1], x[..., 2]
        p2 = torch.where(lum <= 0.5, lum * (1 + s), lum + s - lum * s)
        p1 = 2 * lum - p2
        hh = h * (6.0 / hrange)
        hh = hh - torch.floor(hh / 6) * 6
        sector = torch.floor(hh).long().clamp(0, 5)
        frac = hh - torch.floor(hh)
        tab = [p2, p1, p1 + (p2 - p1) * (1 - frac), p1 + (p2 - p1) * frac]
        grey = s == 0
        fill = lum
    else:
        h, s, v = x[..., 0], x[..., 1], x[..., 2]
        hh = h * (6.0 / hrange)
        hh = hh - torch.floor(hh / 6) * 6
        sector = torch.floor(hh).long().clamp(0, 5)
        frac = hh - torch.floor(hh)
        tab = [v, v * (1 - s), v * (1 - s * frac), v * (1 - s * (1 - frac))]
        grey = s == 0
        fill = v
    sectors = torch.tensor(
        [[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]], device=x.device
    )
    stack = torch.stack(tab, dim=-1)
    idx = sectors[sector]  # (..., 3) -> b, g, r positions in tab
    bgr = torch.gather(stack, -1, idx)
    bgr = torch.where(grey.unsqueeze(-1), fill.unsqueeze(-1).expand_as(bgr), bgr)
    return bgr if bidx == 0 else bgr.flip(-1)


def _gamma(c: torch.Tensor) -> torch.Tensor:
    c = c.clamp(0, 1)
    return torch.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def _gamma_inv(c: torch.Tensor) -> torch.Tensor:
    c = c.clamp(0, 1)
    return torch.where(c <= 0.0031308, c * 12.92, 1.055 * c ** (1 / 2.4) - 0.055)


_WHITE = (0.950456, 1.0, 1.088754)


def _lab_inv_f(x: torch.Tensor, bidx: int) -> torch.Tensor:
    lum, a, bb = (x[..., i].double() for i in range(3))
    y = torch.where(lum <= 8.0, lum / 903.3, ((lum + 16) / 116) ** 3)
    fy = torch.where(lum <= 8.0, 7.787 * y + 16.0 / 116.0, (lum + 16) / 116)
    fx, fz = fy + a / 500, fy - bb / 200

    def finv(v: torch.Tensor) -> torch.Tensor:
        return torch.where(v <= 0.206893, (v - 16.0 / 116.0) / 7.787, v**3)

    xyz = [finv(fx) * _WHITE[0], y, finv(fz) * _WHITE[2]]
    rgb = [_gamma_inv(sum(m[k] * xyz[k] for k in range(3))) for m in _XYZ_INV]
    out = torch.stack(rgb[::-1] if bidx == 0 else rgb, dim=-1)
    return out.float()


def _convert(x: torch.Tensor, code: int) -> torch.Tensor:
    family, bidx, hrange = _FORWARD.get(code) or _INVERSE[code]
    inverse = code in _INVERSE
    u8 = x.dtype == torch.uint8
    if family in ("ycrcb", "yuv"):
        return (_ycc_inv if inverse else _ycc)(x, bidx, family == "yuv")
    if family == "xyz":
        return _matrix(x, bidx, _XYZ_INV if inverse else _XYZ, inverse)
    if family in ("hsv", "hls"):
        hls = family == "hls"
        if not u8:
            hrange = 360  # cv2: float hue is always in degrees
        elif hrange == 256 and (hls or inverse):
            hrange = 255  # measured: cv2 5 uses 255 as the "full" hue range here
        if not inverse:
            if u8 and not hls:
                return _hsv_u8(x, bidx, hrange)
            out = _hsv_hls_f(x.float() / 255.0 if u8 else x, bidx, hrange, hls)
            if u8:
                out = out * torch.tensor([1.0, 255.0, 255.0], device=x.device)
            return saturate(out, x.dtype)
        xf = x.float() * torch.tensor([1.0, 1 / 255.0, 1 / 255.0], device=x.device) if u8 else x
        out = _hsv_hls_inv_f(xf, bidx, hrange, hls)
        return saturate(out * 255.0 if u8 else out, x.dtype)
    xf = x.float()
    if u8:
        xf = xf * torch.tensor([100.0 / 255.0, 1.0, 1.0], device=x.device)
        xf = xf - torch.tensor([0.0, 128.0, 128.0], device=x.device)
    out = _lab_inv_f(xf, bidx)
    return saturate(out * 255.0 if u8 else out, x.dtype)


def cvtColor(
    src: torch.Tensor,
    code: int,
    dst: Any = None,
    dstCn: int = 0,
    hint: Any = None,
) -> torch.Tensor:
    """``cv2.cvtColor`` for a batch (N,H,W[,C]) of uint8 or float32 images."""
    check_image(src)
    code = int(code)
    if dst is not None:
        raise UnsupportedOperation("cvtColor: an output array dst is not supported")
    if code not in SUPPORTED_CODES:
        raise UnsupportedOperation(f"cvtColor: conversion code {code} is not supported")
    cn = channels(src)
    if code in _FROM_GRAY:
        if cn != 1:
            raise UnsupportedOperation(f"cvtColor: code {code} needs 1 channel, got {cn}")
        gray = as_nhwc(src)
        alpha = torch.full_like(gray, _max_value(src.dtype))
        return torch.cat([gray] * 3 + ([alpha] if _FROM_GRAY[code] == 4 else []), dim=-1)
    if cn not in (3, 4):
        raise UnsupportedOperation(f"cvtColor: code {code} needs 3 or 4 channels, got {cn}")
    if code in _SWAPS:
        dcn, swapb = _SWAPS[code]
        return _swap(src, dcn, swapb)
    if src.dtype not in (torch.uint8, torch.float32):
        raise UnsupportedOperation(f"cvtColor: dtype {src.dtype} unsupported; uint8 or float32")
    if code in _TO_GRAY:
        return _to_gray(src, _TO_GRAY[code])
    if src.dtype == torch.uint8 and code in _U8_UNSUPPORTED:
        raise UnsupportedOperation(f"cvtColor: code {code} is reproduced for float32 only")
    if cn != 3:
        raise UnsupportedOperation(f"cvtColor: code {code} needs 3 channels, got {cn}")
    return _convert(src, code)


OPS = [
    op(
        "cv2.cvtColor",
        cvtColor,
        dtypes=frozenset({"uint8", "float32"}),
        fidelity=Fidelity.TOLERANCE,
    )
]

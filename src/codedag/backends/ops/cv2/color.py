"""``cv2.cvtColor`` on torch, batch-first: BGR/RGB(A) swaps, GRAY, YCrCb, YUV, XYZ, HSV, HLS, Lab.

Our own torch code rather than kornia's color module: kornia's float gray, YCbCr and HSV match cv2's
float results (hue in radians; measured), but it has no uint8 path (cv2's fixed-point integer
arithmetic, HSV's division tables, H in 0..180), works on NCHW RGB, and one implementation for both
dtypes is simpler to keep exact. uint8 GRAY (15-bit fixed point), YCrCb, YUV, XYZ and BGR->HSV
reproduce cv2's integer arithmetic bit for bit; HSV and HLS in both directions follow cv2's SIMD and
scalar code pixel by pixel (:mod:`._hsv`), so uint8 results are exact there too. Float hue is in
degrees, as in cv2.

Declared unsupported (the original runs): BGR/RGB->Lab (cv2 5 interpolates quantized tables),
uint8 Lab->BGR and uint8 HLS_FULL (cv2's x86 wheels run them through Intel IPP, whose rounding is
not reproduced); codes cv2 has that are not listed here (YUV 4:2:0, Bayer, ...); non-finite float
values; channel counts, dtypes and ``dstCn`` values cv2 refuses (cv2 raises its own error).
"""

from __future__ import annotations

from typing import Any

import torch

from codedag.backends.contract import Tolerance
from codedag.backends.host_sync import host_sync_allowed
from codedag.backends.ops.cv2 import _hsv
from codedag.backends.ops.cv2._adapter import op
from codedag.backends.ops.cv2._common import (
    as_nhwc,
    channels_of,
    check_image,
    finite,
    is_int,
    no_output,
    saturate,
)

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
# uint8 conversions cv2 5 computes through paths not reproduced: Lab->BGR/RGB, HLS_FULL both ways.
_U8_UNSUPPORTED = frozenset({56, 57, 68, 69, 72, 73})
SUPPORTED_CODES = (
    frozenset(_SWAPS) | set(_TO_GRAY) | set(_FROM_GRAY) | set(_FORWARD) | set(_INVERSE)
)

_SHIFT = 14
_R2Y, _G2Y, _B2Y = 4899, 9617, 1868
_R2Y15, _G2Y15, _B2Y15 = 9798, 19235, 3735
_XYZ = ((0.412453, 0.357580, 0.180423), (0.212671, 0.715160, 0.072169),
        (0.019334, 0.119193, 0.950227))  # fmt: skip
_XYZ_INV = ((3.240479, -1.53715, -0.498535), (-0.969256, 1.875991, 0.041556),
            (0.055648, -0.204043, 1.057311))  # fmt: skip


def _descale(x: torch.Tensor, n: int) -> torch.Tensor:
    return (x + (1 << (n - 1))) >> n


def _swap(x: torch.Tensor, dcn: int, swapb: bool) -> torch.Tensor:
    if dcn == 3 and x.shape[-1] == 3 and not host_sync_allowed():
        # a device: one pass, the channels reversed or copied (on the CPU stacking is faster)
        return x.flip(-1) if swapb else x.clone()
    chans = [x[..., 2], x[..., 1], x[..., 0]] if swapb else [x[..., 0], x[..., 1], x[..., 2]]
    if dcn == 4:
        alpha = x[..., 3] if x.shape[-1] == 4 else torch.full_like(x[..., 0], _max_value(x.dtype))
        chans.append(alpha)
    return torch.stack(chans, dim=-1)


def _to_gray(x: torch.Tensor, bidx: int) -> torch.Tensor:
    b, g, r = x[..., bidx], x[..., 1], x[..., 2 - bidx]
    if x.dtype == torch.uint8:  # cv2's RGB2Gray<uchar>: 15-bit coefficients, rounded shift
        y = b.int() * _B2Y15 + g.int() * _G2Y15 + r.int() * _R2Y15
        return ((y + (1 << 14)) >> 15).to(torch.uint8)
    if x.dtype == torch.uint16:
        y = b.long() * _B2Y15 + g.long() * _G2Y15 + r.long() * _R2Y15
        return ((y + (1 << 14)) >> 15).to(torch.uint16)
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
    rgb = [_gamma_inv(m[0] * xyz[0] + m[1] * xyz[1] + m[2] * xyz[2]) for m in _XYZ_INV]
    out = torch.stack(rgb[::-1] if bidx == 0 else rgb, dim=-1)
    return out.float()


def _convert(x: torch.Tensor, code: int, dcn: int) -> torch.Tensor:
    family, bidx, hrange = _FORWARD.get(code) or _INVERSE[code]
    inverse = code in _INVERSE
    u8 = x.dtype == torch.uint8
    if family in ("ycrcb", "yuv"):
        out = (_ycc_inv if inverse else _ycc)(x, bidx, family == "yuv")
    elif family == "xyz":
        out = _matrix(x, bidx, _XYZ_INV if inverse else _XYZ, inverse)
    elif family == "hsv" and inverse:
        if u8 and hrange == 256:  # HSV_FULL -> BGR: rounded everywhere (cv2 5's IPP path)
            return _full_hsv2bgr(x, bidx, dcn)
        return _hsv.hsv2bgr(x, bidx, hrange if u8 else 360, dcn)
    elif family == "hls" and inverse:
        return _hsv.hls2bgr(x, bidx, hrange if u8 else 360, dcn)
    elif family == "hsv":
        out = _hsv_u8(x, bidx, hrange) if u8 else _hsv.bgr2hsv_f(x, bidx)
    elif family == "hls":
        out = _hsv.bgr2hls(x, bidx, hrange if u8 else 360)
    else:
        xf = x.float()
        if u8:
            xf = xf * torch.tensor([100.0 / 255.0, 1.0, 1.0], device=x.device)
            xf = xf - torch.tensor([0.0, 128.0, 128.0], device=x.device)
        out = saturate(_lab_inv_f(xf, bidx) * (255.0 if u8 else 1.0), x.dtype)
    if inverse and dcn == 4:
        out = torch.cat([out, torch.full_like(out[..., :1], _max_value(x.dtype))], dim=-1)
    return out


def _full_hsv2bgr(x: torch.Tensor, bidx: int, dcn: int) -> torch.Tensor:
    h = x[..., 0].float()
    s, v = x[..., 1].float() * _hsv_f(1 / 255), x[..., 2].float() * _hsv_f(1 / 255)
    out = torch.stack(_hsv._hsv2bgr_native(h, s, v, 6.0 / 255), dim=-1)
    return _hsv._finish(torch.round(out * 255.0).clamp(0, 255).to(torch.uint8), bidx, dcn)


def _hsv_f(value: float) -> float:
    return float(torch.tensor(value, dtype=torch.float32))


def cvtColor(
    src: torch.Tensor,
    code: int,
    dst: object = None,
    dstCn: int = 0,
    hint: object = None,
) -> torch.Tensor:
    """``cv2.cvtColor`` for a batch (N,H,W[,C]) of uint8 or float32 images (uint16 for the swaps
    and gray conversions); ``dstCn`` 3 or 4 adds the alpha channel where cv2 does."""
    check_image(src)
    code = int(code)
    no_output("cvtColor", dst)
    if code in _FROM_GRAY:
        dcn = int(dstCn) or _FROM_GRAY[code]
        gray = as_nhwc(src)
        alpha = torch.full_like(gray, _max_value(src.dtype))
        return torch.cat([gray] * 3 + ([alpha] if dcn == 4 else []), dim=-1)
    if code in _SWAPS:
        default, swapb = _SWAPS[code]
        return _swap(src, int(dstCn) or default, swapb)
    if code in _TO_GRAY:
        return _to_gray(src, _TO_GRAY[code])
    return _convert(src, code, int(dstCn) or 3)


def _max_value(dtype: torch.dtype) -> float:
    return {torch.uint8: 255.0, torch.uint16: 65535.0}.get(dtype, 1.0)


# -- declared check ----------------------------------------------------------------------------


def check_cvt_color(
    src: Any, code: Any, dst: Any = None, dstCn: Any = 0, hint: Any = None
) -> str | None:
    """A listed code, the source channels and dtype cv2 takes for it, ``dstCn`` 0, 3 or 4 for
    conversions to colour, finite float values."""
    if not is_int(code) or int(code) not in SUPPORTED_CODES:
        return f"conversion code {code!r} is not reproduced"
    if not is_int(dstCn) or hint not in (None, 0):
        return f"dstCn {dstCn!r} / hint {hint!r}: expected an integer and the default hint"
    code, cn, dtype = int(code), channels_of(src), src.dtype.name
    to_color = code in _FROM_GRAY or code in _SWAPS or code in _INVERSE
    if to_color and int(dstCn) not in (0, 3, 4):
        return f"dstCn {dstCn} (cv2 makes 3 or 4 channels here)"
    copies = code in _FROM_GRAY or code in _SWAPS or code in _TO_GRAY
    if dtype not in (("uint8", "uint16", "float32") if copies else ("uint8", "float32")):
        return f"{dtype} images for code {code} (cv2 refuses them or they are not reproduced)"
    if dtype == "uint16" and code in _TO_GRAY and cn not in (3, 4):
        return f"{cn} channels for code {code}"
    need = (1,) if code in _FROM_GRAY else (3,) if code in _INVERSE else (3, 4)
    if cn not in need:
        return f"{cn} channels for code {code}; cv2 takes {need}"
    if dtype == "uint8" and code in _U8_UNSUPPORTED:
        return f"uint8 code {code}: cv2 runs it through Intel IPP, whose rounding is not reproduced"
    if dtype == "float32" and not finite(src):
        return "non-finite values"
    return None


OPS = [
    op(
        "cv2.cvtColor",
        cvtColor,
        reproduces=(
            "BGR/RGB/BGRA/RGBA swaps, ->GRAY, GRAY->BGR(A), XYZ, YCrCb, YUV (both ways), HSV and "
            "HSV_FULL (both ways), HLS (both ways), HLS_FULL and Lab->BGR/RGB (float32 only)"
        ),
        check=check_cvt_color,
        dtypes=frozenset({"uint8", "uint16", "float32"}),
        tolerance=Tolerance(
            atol=1e-4,
            rtol=1e-5,
            max_mismatch_frac=1e-3,
            mismatch_atol=1.0,
            note="uint8 bit-exact: GRAY (15-bit fixed point), YCrCb, YUV, XYZ, and HSV and HLS "
            "both ways (cv2's SIMD and scalar code emulated pixel by pixel); float32 HSV and HLS "
            "bit-exact too, other float results within float32 rounding (hue in degrees)",
        ),
    )
]

"""cv2's HSV and HLS conversions, bit for bit: each pixel as cv2's SIMD or scalar code computes it.

cv2 converts a row of W pixels in SIMD blocks and the last ``W mod block`` pixels with scalar code,
and the two disagree: uint8 HSV->BGR truncates in SIMD and rounds in the scalar tail (off by one on
~30% of pixels otherwise); hues outside the nominal range wrap differently (``trunc`` in SIMD,
``fmod``/``floor`` or repeated +-6 in the scalar code); float HLS saturation divides by
``2 - (max + min)`` in SIMD and ``(2 - max) - min`` in the scalar code. Here both are computed in
float32 with the same operations and the pixel's position in its row picks one. The SIMD width of
the cv2 build running here is measured once from cv2 itself (:func:`simd_lanes`).

Hue scale: float hue in degrees; uint8 hue 0..180, or 0..256 (``*_FULL`` forward) and 0..255
(``*_FULL`` inverse), as cv2's ``cvtBGRtoHSV``/``cvtHSVtoBGR`` set it.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from codedag.backends.ops.cv2._common import cv2_own

_F32 = torch.float32
_EPS = float(np.finfo(np.float32).eps)
_BLOCK = 256  # cv2's BLOCK_SIZE of the uint8 HLS conversions (through a float buffer)


@functools.lru_cache(maxsize=1)
def simd_lanes() -> int:
    """float32 lanes of cv2's SIMD color code here (8 with AVX2, 4 with SSE/NEON, 0 without):
    the first tail column of a uint8 HSV->BGR row, where truncation turns into rounding."""
    import cv2

    pixel = np.array([0, 100, 230], np.uint8)  # SIMD gives 139, the scalar code 140
    row = np.tile(pixel, (1, 255, 1))
    out = cv2_own("cvtColor")(row, cv2.COLOR_HSV2BGR)[0, :, 0]
    rounded = np.nonzero(out == 140)[0]
    first = int(rounded[0]) if rounded.size else 255
    for block in (128, 64, 32, 16, 8, 4):  # 4 vectors per step: the SIMD part is a multiple
        if (255 // block) * block == first:
            return block // 4
    return 0


def _f(value: float) -> float:
    return float(np.float32(value))


def _over(numerator: float, t: torch.Tensor) -> torch.Tensor:
    """``numerator / t`` correctly rounded (torch divides a scalar by a tensor through the
    reciprocal, one rounding too many)."""
    return torch.div(torch.full_like(t, numerator), t)


def simd_columns(width: int, block: int, device: torch.device, chunk: int = 0) -> torch.Tensor:
    """(W,) bool: columns a row's SIMD loop converts (blocks of ``block`` from the start of each
    ``chunk``-pixel chunk of the row, or of the whole row)."""
    col = torch.arange(width, device=device)
    if block <= 0:
        return torch.zeros(width, dtype=torch.bool, device=device)
    if not chunk:
        return col < (width // block) * block
    start = (col // chunk) * chunk
    length = torch.clamp(width - start, max=chunk)
    return (col - start) < (length // block) * block


def _pick(mask: torch.Tensor, simd: torch.Tensor, scalar: torch.Tensor) -> torch.Tensor:
    return torch.where(mask.view(1, 1, -1, 1), simd, scalar)


def _select(sector: torch.Tensor, tabs: list[torch.Tensor], rules: list[tuple[str, float, int]]):
    """cv2's masked selection: the first rule ``(op, value, tab)`` that holds picks the tab."""
    out = torch.zeros_like(tabs[0])
    for op, value, tab in reversed(rules):
        cond = {"<": sector < value, "==": sector == value, ">": sector > value}[op]
        cond = cond if op != "<=" else sector <= value
        out = torch.where(cond, tabs[tab], out)
    return out


# -- HSV -> BGR ---------------------------------------------------------------------------------


def _hsv2bgr_simd(h: torch.Tensor, s: torch.Tensor, v: torch.Tensor, hscale: float):
    h = h * _f(hscale)
    pre = torch.trunc(h)
    h = h - pre
    one = torch.ones((), dtype=_F32, device=h.device)
    tabs = [v, v * (one - s), v * _fma(-s, h, 1.0), v * _fma(-s, one - h, 1.0)]
    sector = pre - torch.trunc(pre * _f(1.0 / 6.0)) * 6.0
    b = _select(sector, tabs, [("<", 2, 1), ("==", 2, 3), ("==", 3, 0), ("==", 4, 0), (">", 4, 2)])
    g = _select(sector, tabs, [("<", 1, 3), ("==", 1, 0), ("==", 2, 0), ("==", 3, 2), (">", 3, 1)])
    r = _select(
        sector,
        tabs,
        [("<", 1, 0), ("==", 1, 2), ("==", 2, 1), ("==", 3, 1), ("==", 4, 3), (">", 4, 0)],
    )
    return b, g, r


_SECTORS = ((1, 3, 0), (1, 0, 2), (3, 0, 1), (0, 2, 1), (0, 1, 3), (2, 1, 0))


def _by_sector(sector: torch.Tensor, tabs: list[torch.Tensor]):
    stack = torch.stack(tabs, dim=-1)
    idx = torch.tensor(_SECTORS, device=stack.device)[sector.long()]
    return tuple(torch.gather(stack, -1, idx[..., k : k + 1])[..., 0] for k in range(3))


def wrap6(h: torch.Tensor) -> torch.Tensor:
    """cv2's scalar ``while (h < 0) h += 6; while (h >= 6) h -= 6;`` in float32, step by step
    (each step rounds). Hues so large that a step changes nothing make cv2 loop forever; here
    the loop stops after 4096 steps."""
    for _ in range(4096):
        low, high = h < 0, h >= 6
        if not bool((low | high).any()):
            break
        h = torch.where(low, h + 6.0, torch.where(high, h - 6.0, h))
    return h


def _hsv2bgr_native(h: torch.Tensor, s: torch.Tensor, v: torch.Tensor, hscale: float):
    h = wrap6(h * _f(hscale))
    sector = torch.floor(h)
    h = h - sector
    bad = (sector < 0) | (sector >= 6)
    sector = torch.where(bad, 0.0, sector)
    h = torch.where(bad, 0.0, h)
    one = torch.ones((), dtype=_F32, device=h.device)
    tabs = [v, v * (one - s), v * _fma(-s, h, 1.0), v * _fma(-s, one - h, 1.0)]
    b, g, r = _by_sector(sector, tabs)
    grey = s == 0
    return tuple(torch.where(grey, v, c) for c in (b, g, r))


def _float_channels(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """An HSV or HLS image's three channels in float32: the hue as it is, the other two scaled to
    0..1 (uint8 values times float32 1/255, as cv2's ``*2RGB_b`` converters do)."""
    h, a, b = (x[..., i].to(_F32) for i in range(3))
    if x.dtype == torch.uint8:
        a, b = a * _f(1.0 / 255.0), b * _f(1.0 / 255.0)
    return h, a, b


def hsv2bgr(x: torch.Tensor, bidx: int, hrange: float, dcn: int) -> torch.Tensor:
    """cv2's HSV2RGB_b (uint8) and HSV2RGB_f (float32) on (N, H, W, 3)."""
    u8 = x.dtype == torch.uint8
    hscale = 6.0 / hrange
    h, s, v = _float_channels(x)
    lanes = simd_lanes()
    mask = simd_columns(x.shape[2], 4 * lanes if u8 else lanes, x.device)
    simd = torch.stack(_hsv2bgr_simd(h, s, v, hscale), dim=-1)
    scalar = torch.stack(_hsv2bgr_native(h, s, v, hscale), dim=-1)
    if u8:
        simd = torch.trunc(simd * 255.0).clamp(0, 255)
        scalar = torch.round(scalar * 255.0).clamp(0, 255)
    out = _pick(mask, simd, scalar).to(x.dtype)
    return _finish(out, bidx, dcn)


def _finish(bgr: torch.Tensor, bidx: int, dcn: int) -> torch.Tensor:
    out = bgr if bidx == 0 else bgr.flip(-1)
    if dcn == 4:
        alpha = 255 if out.dtype == torch.uint8 else 1.0
        out = torch.cat([out, torch.full_like(out[..., :1], alpha)], dim=-1)
    return out


# -- HLS -> BGR ---------------------------------------------------------------------------------


def _hls2bgr_simd(h: torch.Tensor, l: torch.Tensor, s: torch.Tensor, hscale: float):  # noqa: E741
    ls = l * s
    elem0 = torch.where(l <= 0.5, ls, s - ls)
    raw = h * _f(hscale)
    pre = torch.trunc(raw)
    hs = raw - pre
    sector = pre - torch.trunc(raw * _f(1.0 / 6.0)) * 6.0
    elem1 = hs + hs
    tabs = [l + elem0, l - elem0, _fma(-elem0, elem1, l + elem0), _fma(elem0, elem1, l - elem0)]
    b = torch.where(
        sector < 2,
        tabs[1],
        torch.where(sector <= 2, tabs[3], torch.where(sector <= 4, tabs[0], tabs[2])),
    )
    g = torch.where(
        sector < 1,
        tabs[3],
        torch.where(sector <= 2, tabs[0], torch.where(sector < 4, tabs[2], tabs[1])),
    )
    r = torch.where(
        sector < 1,
        tabs[0],
        torch.where(
            sector < 2,
            tabs[2],
            torch.where(sector < 4, tabs[1], torch.where(sector <= 4, tabs[3], tabs[0])),
        ),
    )
    return b, g, r


def _hls2bgr_native(h: torch.Tensor, l: torch.Tensor, s: torch.Tensor, hscale: float):  # noqa: E741
    one = torch.ones((), dtype=_F32, device=h.device)
    p2 = torch.where(l <= 0.5, l * (one + s), _fma(-l, s, l + s))
    p1 = 2.0 * l - p2
    h = wrap6(h * _f(hscale))
    sector = torch.floor(h).clamp(0, 5)
    h = h - sector
    tabs = [p2, p1, _fma(p2 - p1, one - h, p1), _fma(p2 - p1, h, p1)]
    b, g, r = _by_sector(sector, tabs)
    grey = s == 0
    return tuple(torch.where(grey, l, c) for c in (b, g, r))


def hls2bgr(x: torch.Tensor, bidx: int, hrange: float, dcn: int) -> torch.Tensor:
    """cv2's HLS2RGB_b (uint8, through float blocks of 256 pixels) and HLS2RGB_f (float32)."""
    u8 = x.dtype == torch.uint8
    hscale = 6.0 / hrange
    h, l, s = _float_channels(x)  # noqa: E741
    lanes = simd_lanes()
    mask = simd_columns(x.shape[2], lanes, x.device, chunk=_BLOCK if u8 else 0)
    simd = torch.stack(_hls2bgr_simd(h, l, s, hscale), dim=-1)
    scalar = torch.stack(_hls2bgr_native(h, l, s, hscale), dim=-1)
    out = _pick(mask, simd, scalar)
    if u8:
        out = torch.round(out * 255.0).clamp(0, 255)
    return _finish(out.to(x.dtype), bidx, dcn)


# -- BGR -> HSV (float) and BGR -> HLS -----------------------------------------------------------


def _fma(a: torch.Tensor, b: torch.Tensor | float, c: torch.Tensor | float) -> torch.Tensor:
    """float32 ``a * b + c`` rounded once (a SIMD fused multiply-add)."""
    bb = b.double() if isinstance(b, torch.Tensor) else b
    cc = c.double() if isinstance(c, torch.Tensor) else c
    return (a.double() * bb + cc).float()


def _scalar_hue(
    r: torch.Tensor, g: torch.Tensor, b: torch.Tensor, v: torch.Tensor, k: torch.Tensor
) -> torch.Tensor:
    """The scalar code's hue before wrapping: ``(b - r) * k + 120`` and ``(r - g) * k + 240``
    are contracted to one ``fma`` by the compiler in cv2's builds (rounded once)."""
    green = _fma(b - r, k, 120.0)
    blue = _fma(r - g, k, 240.0)
    return torch.where(v == r, (g - b) * k, torch.where(v == g, green, blue))


def _simd_hue_parts(
    b: torch.Tensor, g: torch.Tensor, r: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The SIMD code's max, min, hue numerator and hue offset (degrees) of each pixel."""
    vmax = torch.maximum(torch.maximum(r, g), b)
    vmin = torch.minimum(torch.minimum(r, g), b)
    r_max, g_max = r == vmax, g == vmax
    hv = torch.where(r_max, g - b, torch.where(g_max, b - r, r - g))
    offset = torch.where(r_max, torch.where(g < b, 360.0, 0.0), torch.where(g_max, 120.0, 240.0))
    return vmax, vmin, hv, offset.to(_F32)


def _scalar_max_min(
    b: torch.Tensor, g: torch.Tensor, r: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The scalar code's max and min, by comparisons starting from r."""
    v = torch.where(r < g, g, r)
    v = torch.where(v < b, b, v)
    vm = torch.where(r > g, g, r)
    vm = torch.where(vm > b, b, vm)
    return v, vm


def bgr2hsv_f(x: torch.Tensor, bidx: int) -> torch.Tensor:
    """cv2's RGB2HSV_f on (N, H, W, C) float32: hue in degrees."""
    b, g, r = x[..., bidx], x[..., 1], x[..., 2 - bidx]
    vmax, vmin, hv, res = _simd_hue_parts(b, g, r)
    diff = vmax - vmin
    s_simd = diff / (vmax.abs() + _EPS)
    h_simd = _fma(hv, _over(60.0, diff + _EPS), res)
    # scalar: 60/(diff + eps) in double
    v, vm = _scalar_max_min(b, g, r)
    d = v - vm
    s_nat = d / (v.abs() + _EPS)
    k = _over(60.0, (d + _EPS).double()).float()
    h_nat = _scalar_hue(r, g, b, v, k)
    h_nat = torch.where(h_nat < 0, h_nat + 360.0, h_nat)
    mask = simd_columns(x.shape[2], simd_lanes(), x.device)
    simd = torch.stack([h_simd, s_simd, vmax], dim=-1)
    scalar = torch.stack([h_nat, s_nat, v], dim=-1)
    return _pick(mask, simd, scalar)


def _bgr2hls_parts(b: torch.Tensor, g: torch.Tensor, r: torch.Tensor, hscale: float):
    vmax, vmin, hv, part = _simd_hue_parts(b, g, r)
    diff = vmax - vmin
    msum = vmax + vmin
    lum = msum * 0.5
    s_simd = diff / torch.where(lum < 0.5, msum, 2.0 - msum)
    h_simd = _fma(hv, _over(60.0, diff), part) * _f(hscale)
    some = diff > _EPS
    simd = (torch.where(some, h_simd, 0.0), lum, torch.where(some, s_simd, 0.0))
    # scalar
    v, vm = _scalar_max_min(b, g, r)
    d = v - vm
    lum_n = (v + vm) * 0.5
    s_n = torch.where(lum_n < 0.5, d / (v + vm), d / ((2.0 - v) - vm))
    h_n = _scalar_hue(r, g, b, v, _over(60.0, d))
    h_n = torch.where(h_n < 0, h_n + 360.0, h_n)
    some_n = d > _EPS
    scalar = (torch.where(some_n, h_n, 0.0) * _f(hscale), lum_n, torch.where(some_n, s_n, 0.0))
    return torch.stack(simd, dim=-1), torch.stack(scalar, dim=-1)


def bgr2hls(x: torch.Tensor, bidx: int, hrange: float) -> torch.Tensor:
    """cv2's RGB2HLS_f (float32) and RGB2HLS_b (uint8, through float blocks of 256 pixels)."""
    u8 = x.dtype == torch.uint8
    xf = x[..., :3].to(_F32)
    if u8:
        xf = xf * _f(1.0 / 255.0)
    b, g, r = xf[..., bidx], xf[..., 1], xf[..., 2 - bidx]
    simd, scalar = _bgr2hls_parts(b, g, r, hrange / 360.0)
    mask = simd_columns(x.shape[2], simd_lanes(), x.device, chunk=_BLOCK if u8 else 0)
    out = _pick(mask, simd, scalar)
    if not u8:
        return out
    scale = torch.tensor([1.0, 255.0, 255.0], dtype=_F32, device=x.device)
    return torch.round(out * scale).clamp(0, 255).to(torch.uint8)

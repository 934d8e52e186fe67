"""Fast exact paths of cv2 5's bilinear warp kernel (``warpAffine``/``warpPerspective``, uint8 and
float32 images of 1, 3 or 4 channels), given each output pixel's float32 source coordinate as
cv2 computes it.

cv2 interpolates with three ``fma`` lerps in float32 and rounds half to even to uint8. Two ways
get the same bits with fewer passes than tap-by-tap emulation:

* **uint8: sample, then settle the doubtful.** ``grid_sample`` in float64 (one fused pass; the
  borders as its padding modes, a one-pixel ring of the fill value, or padding) gives the exact bilinear value at cv2's coordinates, within 1e-4 of cv2's
  float32 lerps (three roundings of values below 256). Rounding it gives cv2's byte wherever the
  value is farther than that from a half; the few elements that are not (a few in ten thousand,
  all of them for warps whose fractions are exact halves) are computed again as cv2 does, all
  of them in one batch of small ops (one gather of every tap), and a warp with too many of them
  runs :func:`remap_table` instead. One added constant serves both the rounding and the doubt
  test (see :func:`remap_sampled`).
* **:func:`remap_table`** (float32 images, and the fallback): border rules as one small table per
  axis over the range the coordinates reach (a constant border reads a one-pixel ring of the
  fill value: a pixel wholly outside lerps four equal fill values, which is the fill value), each
  tap one flat gather (uint8 pixels of up to 4 channels packed into one int32), the lerps on
  channel planes; for uint8 the horizontal lerps in float32, exactly (see :func:`_lerp_u8`).

Both return ``None`` where a coordinate is not finite or lies beyond int32: the general path
(:func:`codedag.backends.ops.cv2.warp._remap_f32`) handles those.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F

from codedag.backends.ops.cv2._common import (
    BORDER_CONSTANT,
    BORDER_REFLECT,
    BORDER_REFLECT_101,
    BORDER_REPLICATE,
    BORDER_WRAP,
    pad_nhwc,
    saturate,
    torch_border,
)

DOUBT = 2e-4
"""How far from a half a float64 bilinear value may be from cv2's float32 lerps (bounded by
three float32 roundings of values below 256: 6e-5)."""
MAX_DOUBTFUL = 0.05
"""Above this share of doubtful elements the table path runs instead (exact halves)."""
MAX_MARGIN = 4
"""Padding, and the coordinate tables, reach at most this many times the image's side."""


def remap_linear(
    x: torch.Tensor, coords: torch.Tensor, border: int, cval: list[float]
) -> torch.Tensor | None:
    """cv2's bilinear warp of ``x`` (N,H,W,C) at source coordinates ``coords`` (B,2,P) float32
    (an x and a y plane), B 1 or N: ``(N, P, C)``, or ``None`` (the general path runs)."""
    if x.dtype == torch.uint8:
        sampled = remap_sampled(x, coords, border, cval)
        if sampled is not None:
            return sampled
    if x.dtype in (torch.uint8, torch.float32):
        return remap_table(x, coords, border, cval)
    return None


def _spans(coords: torch.Tensor) -> tuple[tuple[int, int], tuple[int, int]] | None:
    """The smallest and largest ``floor`` of the x and of the y coordinates (one reduction, one
    read back), or ``None``: not finite, or huge."""
    dims = (0, 2)
    (lo_x, lo_y), (hi_x, hi_y) = torch.stack((coords.amin(dims), coords.amax(dims))).tolist()
    bounds = (lo_x, lo_y, hi_x, hi_y)
    if not all(math.isfinite(v) and abs(v) < 2.0**30 for v in bounds):
        return None
    return (math.floor(lo_x), math.floor(hi_x)), (math.floor(lo_y), math.floor(hi_y))


# -- uint8: grid_sample in float64, doubtful elements settled ----------------------------------


def remap_sampled(
    x: torch.Tensor, coords: torch.Tensor, border: int, cval: list[float]
) -> torch.Tensor | None:
    """The uint8 path of the module docstring.

    One pass adds ``0.5 + DOUBT``: truncating the sum rounds half up wherever the value is not
    within ``DOUBT`` of a half, and its fraction below ``2 * DOUBT`` marks the elements that are
    (the values lie in 0..255, so the sum is positive and below 256)."""
    n, _h, _w, c = x.shape
    spans = _spans(coords)
    if spans is None:
        return None
    sampling = _sampling(x, spans[0], spans[1], border, cval)
    if sampling is None:
        return None
    src, left, top, padding, corners = sampling
    hp, wp = int(src.shape[1]), int(src.shape[2])
    if hp < 2 or wp < 2:
        return None
    b, _, p = coords.shape
    # grid_sample's pixel of a grid value g: (g + 1) / 2 * (size - 1), or ((g + 1) * size - 1) / 2
    scale = [2.0 / (wp - 1), 2.0 / (hp - 1)] if corners else [2.0 / wp, 2.0 / hp]
    shift = [left * scale[0] - 1.0, top * scale[1] - 1.0]
    if not corners:
        shift = [shift[0] + 1.0 / wp, shift[1] + 1.0 / hp]
    f64 = torch.float64
    grid = torch.mul(coords, torch.tensor(scale, dtype=f64, device=x.device).view(1, 2, 1))
    grid.add_(torch.tensor(shift, dtype=f64, device=x.device).view(1, 2, 1))
    grid = grid.permute(0, 2, 1).unsqueeze(1)  # (B, 1, P, 2), the planes as strides
    if b != n:
        grid = grid.expand(n, 1, p, 2)
    planes = src.permute(0, 3, 1, 2).double()
    value = F.grid_sample(
        planes, grid, mode="bilinear", padding_mode=padding, align_corners=corners
    ).view(-1)
    value.add_(0.5 + DOUBT)
    out = value.to(torch.uint8)
    doubtful = _doubtful(value.frac_())
    if doubtful is None:
        return None
    if doubtful.numel():
        out[doubtful] = _points(x, coords, doubtful, border, cval)
    return out.view(n, c, p).permute(0, 2, 1)


def _doubtful(frac: torch.Tensor) -> torch.Tensor | None:
    """Flat indices of the fractions below ``2 * DOUBT``, or ``None`` above ``MAX_DOUBTFUL``.

    ``nonzero`` runs over the mask read as int64 words, eight flags a word (most words are zero),
    and then over the eight flags of each word that is not."""
    numel = frac.numel()
    mask = torch.zeros(-(-numel // 8) * 8, dtype=torch.bool, device=frac.device)
    torch.lt(frac, 2 * DOUBT, out=mask[:numel])
    words = mask.view(torch.int64).nonzero().view(-1, 1)
    if len(words) > MAX_DOUBTFUL * numel:
        return None
    flags = (words * 8 + torch.arange(8, device=frac.device)).view(-1)
    doubtful = flags[mask[flags]]
    return None if len(doubtful) > MAX_DOUBTFUL * numel else doubtful


def _sampling(
    x: torch.Tensor,
    span_x: tuple[int, int],
    span_y: tuple[int, int],
    border: int,
    cval: list[float],
) -> tuple[torch.Tensor, int, int, str, bool] | None:
    """How ``grid_sample`` reads what cv2's border rule reads: the image (padded where needed),
    the padding on the left and top, the padding mode and ``align_corners``.

    Reflect-101 mirrors about the first and last pixel centers, reflect about the image edges:
    ``grid_sample``'s reflection with and without ``align_corners``; mirroring the coordinate
    mirrors the interpolated value, so the taps need no padding."""
    _n, h, w, _c = x.shape
    if border == BORDER_REPLICATE:
        return x, 0, 0, "border", True
    if border == BORDER_REFLECT_101:
        return x, 0, 0, "reflection", True
    if border == BORDER_REFLECT:
        return x, 0, 0, "reflection", False
    if border == BORDER_CONSTANT:
        return _ring(x, cval), 1, 1, "border", True
    left, right = max(0, -span_x[0]), max(0, span_x[1] + 2 - w)
    top, bottom = max(0, -span_y[0]), max(0, span_y[1] + 2 - h)
    if max(left, right) > MAX_MARGIN * w or max(top, bottom) > MAX_MARGIN * h:
        return None
    return pad_nhwc(x, top, bottom, left, right, border), left, top, "border", True


def _ring(x: torch.Tensor, cval: list[float], dtype: torch.dtype | None = None) -> torch.Tensor:
    """``x`` inside a one-pixel ring of the fill value (as ``x``'s dtype holds it), in ``dtype``
    (default ``x``'s)."""
    n, h, w, c = x.shape
    src = torch.empty((n, h + 2, w + 2, c), dtype=dtype or x.dtype, device=x.device)
    src[:] = _fill(cval, x.dtype, x.device).view(1, 1, 1, c)
    src[:, 1:-1, 1:-1] = x
    return src


def _fill(cval: list[float], dtype: torch.dtype, dev: torch.device) -> torch.Tensor:
    """The border value, per channel, as ``dtype`` holds it."""
    return saturate(torch.tensor(cval, dtype=torch.float64), dtype).to(dev)


@lru_cache(maxsize=8)
def _taps(dev: torch.device) -> torch.Tensor:
    """The 2x2 taps' (dx, dy), in the order the lerps take them: (4, 2)."""
    return torch.tensor(((0, 0), (1, 0), (0, 1), (1, 1)), device=dev)


def _points(
    x: torch.Tensor,
    coords: torch.Tensor,
    elements: torch.Tensor,
    border: int,
    cval: list[float],
) -> torch.Tensor:
    """cv2's uint8 bilinear value of ``K`` elements, flat indices into the (N, C, P) output: (K,).

    All four taps of every element are one gather; the lerps run on (K, 2) and (K,)."""
    n, h, w, c = x.shape
    b, _, p = coords.shape
    dev = x.device
    sample, pixel = elements.div(c * p, rounding_mode="floor"), elements.remainder(p)
    channel = elements.div(p, rounding_mode="floor").remainder_(c)
    points = coords.transpose(1, 2)  # (B, P, 2)
    xy = points[sample, pixel] if b == n else points[0, pixel]  # (K, 2) float32
    base = torch.floor(xy)
    frac = (xy - base).double()  # exact
    at = _border_taps(base.long().unsqueeze(1) + _taps(dev), w, h, border)  # (K, 4, 2)
    ix, iy = at.clamp(min=0).unbind(-1)
    values = x[sample.unsqueeze(1), iy, ix, channel.unsqueeze(1)].float()  # (K, 4)
    if border == BORDER_CONSTANT:
        fill = _fill(cval, x.dtype, dev).float()[channel].unsqueeze(1)
        values = torch.where((at >= 0).all(-1), values, fill)
    # fma(a, p1 - p0, p0) in float32: exact in float64, rounded once; the lerps' values are
    # within their taps' range, so rounding half to even needs no clamp
    left, right = values[:, 0::2], values[:, 1::2]  # (K, dy)
    rows = torch.addcmul(left.double(), frac[:, :1], (right - left).double()).float()
    top, bottom = rows[:, 0], rows[:, 1]
    out = torch.addcmul(top.double(), frac[:, 1], (bottom - top).double())
    return out.float().round_().to(torch.uint8)


def _border_taps(taps: torch.Tensor, w: int, h: int, border: int) -> torch.Tensor:
    """``cv::borderInterpolate`` of (..., 2) integer x and y positions in a ``w`` by ``h``
    image: -1 for constant-border positions."""
    lengths = _sides(w, h, taps.device)
    if border == BORDER_CONSTANT:
        inside = (taps >= 0) & (taps < lengths)
        return torch.where(inside, taps, -1)
    if border == BORDER_REPLICATE:
        return torch.minimum(taps.clamp(min=0), lengths - 1)
    if border == BORDER_WRAP:
        return torch.remainder(taps, lengths)
    delta = 1 if border == BORDER_REFLECT_101 else 0
    period = (2 * lengths - 2 * delta).clamp_(min=1)  # a side of 1: every position is 0
    q = torch.remainder(taps, period)
    return torch.where(q < lengths, q, period - q - (1 - delta))


@lru_cache(maxsize=64)
def _sides(w: int, h: int, dev: torch.device) -> torch.Tensor:
    return torch.tensor([w, h], device=dev)


# -- the table path --------------------------------------------------------------------------


def remap_table(
    x: torch.Tensor, coords: torch.Tensor, border: int, cval: list[float]
) -> torch.Tensor | None:
    """The table path of the module docstring: ``(N, P, C)``, planar in memory."""
    n, h, w, _c = x.shape
    spans = _spans(coords)
    if spans is None:
        return None
    sx, sy = coords.unbind(1)
    fx, fy = torch.floor(sx), torch.floor(sy)
    (lo_x, hi_x), (lo_y, hi_y) = spans
    if hi_x - lo_x > MAX_MARGIN * (w + 2) or hi_y - lo_y > MAX_MARGIN * (h + 2):
        return None  # coordinates far outside (a perspective's horizon): tables too long
    if border == BORDER_CONSTANT:
        src = _ring(x, cval)
        lut_x = _ring_table(lo_x, hi_x + 1, w, x.device)
        lut_y = _ring_table(lo_y, hi_y + 1, h, x.device)
        width, height = w + 2, h + 2
    else:
        src = x
        lut_x = _border_table(lo_x, hi_x + 1, w, border, x.device)
        lut_y = _border_table(lo_y, hi_y + 1, h, border, x.device)
        width, height = w, h
    index_dtype = torch.int32 if n * height * width < 2**31 else torch.int64
    ix = fx.long().sub_(lo_x).to(index_dtype).reshape(-1)
    iy = fy.long().sub_(lo_y).to(index_dtype).reshape(-1)
    lut_x, lut_y = lut_x.to(index_dtype), (lut_y * width).to(index_dtype)
    cols = (lut_x.index_select(0, ix), lut_x.index_select(0, ix + 1))
    rows = (lut_y.index_select(0, iy), lut_y.index_select(0, iy + 1))
    table, planes = _pixels(src)
    b = coords.shape[0]
    base = (torch.arange(n, device=x.device, dtype=index_dtype) * (height * width)).view(n, 1)

    def tap(r: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        index = (r + q).view(b, -1)
        index = (index.expand(n, -1) if b != n else index) + base
        return planes(table.index_select(0, index.reshape(-1)), n)  # (N, C, P) float32

    ax = (sx - fx).unsqueeze(1)  # (B, 1, P)
    ay = (sy - fy).unsqueeze(1).double()
    taps = [tap(rows[0], cols[0]), tap(rows[0], cols[1]), tap(rows[1], cols[0])]
    taps.append(tap(rows[1], cols[1]))
    if x.dtype == torch.uint8:
        v0, v1 = _lerp_u8(taps, ax, sx)
    else:
        v0, v1 = _lerp64(taps[0], taps[1], ax), _lerp64(taps[2], taps[3], ax)
    out = _lerp64(v0, v1, ay)
    if x.dtype == torch.uint8:
        out = out.round_().clamp_(0, 255).to(torch.uint8)
    return out.permute(0, 2, 1)


def _lerp64(p0: torch.Tensor, p1: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
    """``fma(a, p1 - p0, p0)`` in float32: exact in float64, rounded once."""
    return torch.addcmul(p0.double(), a.double(), (p1 - p0).double()).float()


def _lerp_u8(
    taps: list[torch.Tensor], ax: torch.Tensor, sx: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two horizontal ``fma`` lerps of uint8 taps in float32, exactly.

    The fraction splits into ``hi`` (a multiple of 2**-12) and ``lo``: ``p0 + hi * d`` is exact
    (integers below 2**9 and 21 bits), ``lo * d`` too while ``lo`` has at most 15 bits, so one
    float32 addition rounds the exact sum once, as ``fma`` does. ``lo`` has more bits only for
    fractions of coordinates in [0, 1/16) (finer float32 steps there): those pixels are redone
    in float64.
    """
    hi = torch.floor(ax * 4096.0).mul_(1.0 / 4096.0)
    lo = ax - hi
    out = []
    for p0, p1 in ((taps[0], taps[1]), (taps[2], taps[3])):
        d = p1 - p0
        out.append(torch.addcmul(p0, hi, d).addcmul_(lo, d))
    fine = ((sx >= 0) & (sx < 0.0625)).nonzero()
    if fine.numel():
        n = taps[0].shape[0]
        maps, pixels = fine[:, 0], fine[:, 1]
        if ax.shape[0] != n:  # one map for every sample
            samples = torch.arange(n, device=sx.device).repeat_interleave(len(pixels))
            maps, pixels = torch.zeros_like(samples), pixels.repeat(n)
        else:
            samples = maps
        a = ax[maps, 0, pixels].unsqueeze(1)
        for v, p0, p1 in ((out[0], taps[0], taps[1]), (out[1], taps[2], taps[3])):
            v[samples, :, pixels] = _lerp64(p0[samples, :, pixels], p1[samples, :, pixels], a)
    return out[0], out[1]


def _ring_table(lo: int, hi: int, length: int, dev: torch.device) -> torch.Tensor:
    """Positions ``lo..hi`` in an axis padded with one pixel of the fill value on each side."""
    return (torch.arange(lo, hi + 1, device=dev).clamp_(-1, length) + 1).long()


def _border_table(lo: int, hi: int, length: int, border: int, dev: torch.device) -> torch.Tensor:
    """Positions ``lo..hi`` under cv2's border rule (``cv::borderInterpolate``)."""
    return torch_border(torch.arange(lo, hi + 1, device=dev), length, border)


def _pixels(src: torch.Tensor) -> tuple[torch.Tensor, Any]:
    """Every pixel of the batch as one row of a table one ``index_select`` reads (uint8 pixels
    of up to 4 channels packed into one int32), and how gathered rows become float32 channel
    planes ``(N, C, P)``."""
    n, h, w, c = src.shape
    if src.dtype == torch.uint8 and 1 < c <= 4:
        packed = src if c == 4 else F.pad(src, (0, 4 - c))
        words = packed.contiguous().view(torch.int32).reshape(-1)

        def from_words(values: torch.Tensor, count: int) -> torch.Tensor:
            return values.view(torch.uint8).view(count, -1, 4).permute(0, 2, 1)[:, :c].float()

        return words, from_words
    table = src.reshape(n * h * w, c)

    def from_rows(values: torch.Tensor, count: int) -> torch.Tensor:
        return values.view(count, -1, c).permute(0, 2, 1).float()

    return table, from_rows


# -- without host reads: every element exact, decided on the device ------------------------------


def remap_device(
    x: torch.Tensor, coords: torch.Tensor, border: int, cval: list[float]
) -> torch.Tensor:
    """cv2's bilinear warp of uint8 or float32 ``x`` (N,H,W,C) at finite source coordinates
    ``coords`` (B,2,P) beyond which no tap lies more than 2**29 pixels out: ``(N, P, C)``.

    Nothing is read back to the host: the border rule applies to the x and y taps of every
    pixel at once (a constant border reads a one-pixel ring of the fill value), every tap's
    channels are one flat gather of the image in float32 (uint8 values are exact there), laid
    out (dy, dx, N, P, C) so that each lerp takes its operands as one ``unbind``, and every
    element is lerped exactly as cv2 does (each ``fma`` in float64, rounded once to float32),
    so no element needs settling afterwards."""
    n, h, w, c = x.shape
    b, _, p = coords.shape
    if border == BORDER_CONSTANT:
        src = _ring(x, cval, torch.float32)
    else:
        src = x.float()  # no copy for float32
    at = coords.view(b, 2, p, 1)
    base = torch.floor(at)
    frac = (at - base).double()  # exact: (B, 2, P, 1)
    taps = _border_planes(base.long() + _quad(x.device), w, h, border)  # (dy, dx, B, 2, P, 1)
    scale, offsets, channels = _flat_index(
        n, c, int(src.shape[1]), int(src.shape[2]), border, x.device
    )
    pixels = torch.addcmul(offsets, taps, scale).sum(3)  # (dy, dx, N, P, 1)
    values = src.take(pixels + channels)  # (dy, dx, N, P, C)
    ax, ay = frac.unbind(1)  # (B, P, 1)
    # float32 operands and float64 fractions: each fma is computed in float64, exactly;
    # cv2's differences are rounded to float32 (exact for uint8 taps)
    left, right = values.unbind(1)  # (dy, N, P, C)
    top, bottom = torch.addcmul(left, ax, right - left).float().unbind(0)  # (N, P, C)
    out = torch.addcmul(top, ay, bottom - top).float()
    if x.dtype == torch.uint8:  # within the taps' range: rounding half to even, no clamp
        return out.round_().to(torch.uint8)
    return out


@lru_cache(maxsize=8)
def _quad(dev: torch.device) -> torch.Tensor:
    """The 2x2 taps' offsets (dy, dx, 1, plane, 1, 1): x plane ``dx``, y plane ``dy``."""
    dx = torch.tensor([[0, 1], [0, 1]], device=dev)
    return torch.stack([dx, dx.T], -1).view(2, 2, 1, 2, 1, 1)


@lru_cache(maxsize=64)
def _flat_index(
    n: int, c: int, height: int, width: int, border: int, dev: torch.device
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """What makes (dy, dx, B, 2, P, 1) taps flat indices into an (N, height, width, C) image:
    ``offsets + taps * scale`` summed over the planes, plus ``channels``. Each plane's scale
    (C, width * C), shaped (2, 1, 1); the offsets (1, 1, N, 2, 1, 1): each sample's first
    element on the y plane, and the ring's one pixel of a constant border on both; the
    channels (C,)."""
    scale = torch.tensor([c, width * c], device=dev).view(2, 1, 1)
    offsets = torch.zeros((1, 1, n, 2, 1, 1), dtype=torch.int64, device=dev)
    offsets[:, :, :, 1] = (torch.arange(n, device=dev) * (height * width * c)).view(n, 1, 1)
    if border == BORDER_CONSTANT:
        offsets += scale
    return scale, offsets, torch.arange(c, device=dev)


@lru_cache(maxsize=64)
def _plane_constants(w: int, h: int, border: int, dev: torch.device) -> tuple[torch.Tensor, ...]:
    """Per-plane (x, y) lengths for :func:`_border_planes`, shaped (2, 1, 1)."""
    lengths = torch.tensor([w, h], device=dev).view(2, 1, 1)
    delta = 1 if border == BORDER_REFLECT_101 else 0
    period = (2 * lengths - 2 * delta).clamp_(min=1)  # a side of 1: every position is 0
    return lengths, lengths - 1, period, period - (1 - delta)


def _border_planes(taps: torch.Tensor, w: int, h: int, border: int) -> torch.Tensor:
    """``cv::borderInterpolate`` of taps (..., 2, P, 1), the x plane against ``w`` and the y
    plane against ``h``; a constant border maps into the one-pixel ring (-1 and the side)."""
    lengths, last, period, mirror = _plane_constants(w, h, border, taps.device)
    if border == BORDER_CONSTANT:
        return torch.minimum(taps.clamp_(min=-1), lengths)
    if border == BORDER_REPLICATE:
        return torch.minimum(taps.clamp_(min=0), last)
    if border == BORDER_WRAP:
        return torch.remainder(taps, lengths)
    q = torch.remainder(taps, period)
    return torch.where(q < lengths, q, mirror - q)

"""Fast exact paths of cv2 5's bilinear warp kernel (``warpAffine``/``warpPerspective``, uint8 and
float32 images of 1, 3 or 4 channels), given each output pixel's float32 source coordinate as
cv2 computes it.

cv2 interpolates with three ``fma`` lerps in float32 and rounds half to even to uint8. Two ways
get the same bits with fewer passes than tap-by-tap emulation:

* **uint8: sample, then settle the doubtful.** ``grid_sample`` in float64 (one fused pass; the
  borders as its padding modes, a one-pixel ring of the fill value, or padding) gives the exact bilinear value at cv2's coordinates, within 1e-4 of cv2's
  float32 lerps (three roundings of values below 256). Rounding it gives cv2's byte wherever the
  value is farther than that from a half; the few elements that are not (a few in ten thousand,
  all of them for warps whose fractions are exact halves) are computed again as cv2 does, point
  by point, and a warp with too many of them runs :func:`remap_table` instead.
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
from typing import Any

import torch
import torch.nn.functional as F

from codedag.backends.ops.cv2._common import (
    BORDER_CONSTANT,
    BORDER_REFLECT,
    BORDER_REFLECT_101,
    BORDER_REPLICATE,
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
    x: torch.Tensor, sx: torch.Tensor, sy: torch.Tensor, border: int, cval: list[float]
) -> torch.Tensor | None:
    """cv2's bilinear warp of ``x`` (N,H,W,C) at coordinates ``sx``, ``sy`` (B,P), B 1 or N:
    ``(N, P, C)``, or ``None`` (the general path runs)."""
    if x.dtype == torch.uint8:
        sampled = remap_sampled(x, sx, sy, border, cval)
        if sampled is not None:
            return sampled
    if x.dtype in (torch.uint8, torch.float32):
        return remap_table(x, sx, sy, border, cval)
    return None


def _span(sx: torch.Tensor) -> tuple[int, int] | None:
    """The smallest and largest ``floor`` of the coordinates (``None``: not finite, or huge)."""
    lo, hi = (float(v) for v in torch.aminmax(sx))
    if not (math.isfinite(lo) and math.isfinite(hi)) or max(abs(lo), abs(hi)) >= 2.0**30:
        return None
    return math.floor(lo), math.floor(hi)


# -- uint8: grid_sample in float64, doubtful elements settled ----------------------------------


def remap_sampled(
    x: torch.Tensor, sx: torch.Tensor, sy: torch.Tensor, border: int, cval: list[float]
) -> torch.Tensor | None:
    """The uint8 path of the module docstring."""
    n, _h, _w, c = x.shape
    span_x, span_y = _span(sx), _span(sy)
    if span_x is None or span_y is None:
        return None
    sampling = _sampling(x, span_x, span_y, border, cval)
    if sampling is None:
        return None
    src, left, top, padding, corners = sampling
    hp, wp = int(src.shape[1]), int(src.shape[2])
    if hp < 2 or wp < 2:
        return None
    b, p = sx.shape
    grid = torch.empty((b, 1, p, 2), dtype=torch.float64, device=x.device)
    for axis, (coord, offset, size) in enumerate(((sx, left, wp), (sy, top, hp))):
        g = grid[..., axis].view(b, p)
        g.copy_(coord).add_(offset)
        if corners:  # pixel = (g + 1) / 2 * (size - 1)
            g.mul_(2.0 / (size - 1)).sub_(1.0)
        else:  # pixel = ((g + 1) * size - 1) / 2
            g.mul_(2.0).add_(1.0).div_(size).sub_(1.0)
    if b != n:
        grid = grid.expand(n, 1, p, 2)
    planes = src.permute(0, 3, 1, 2).double()
    value = F.grid_sample(
        planes, grid, mode="bilinear", padding_mode=padding, align_corners=corners
    )
    shifted = value.view(n, c, p).add_(0.5)  # within 0.5..255.5: truncation rounds half up
    out = shifted.to(torch.uint8)
    # a half (a tie, which cv2 rounds to even) or anything near one is settled below
    doubtful = shifted.frac_().sub_(0.5).abs_().gt_(0.5 - DOUBT).nonzero(as_tuple=True)
    count = len(doubtful[0])
    if count > MAX_DOUBTFUL * out.numel():
        return None
    if count:
        sample, _channel, pixel = doubtful
        maps = sample if b == n else torch.zeros_like(sample)
        out[sample, :, pixel] = _points(x, sample, sx[maps, pixel], sy[maps, pixel], border, cval)
    return out.permute(0, 2, 1)


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
    n, h, w, c = x.shape
    if border == BORDER_REPLICATE:
        return x, 0, 0, "border", True
    if border == BORDER_REFLECT_101:
        return x, 0, 0, "reflection", True
    if border == BORDER_REFLECT:
        return x, 0, 0, "reflection", False
    if border == BORDER_CONSTANT:
        fill = saturate(torch.tensor(cval, dtype=torch.float64), x.dtype).to(x.device)
        src = torch.empty((n, h + 2, w + 2, c), dtype=x.dtype, device=x.device)
        src[:] = fill.view(1, 1, 1, c)
        src[:, 1:-1, 1:-1] = x
        return src, 1, 1, "border", True
    left, right = max(0, -span_x[0]), max(0, span_x[1] + 2 - w)
    top, bottom = max(0, -span_y[0]), max(0, span_y[1] + 2 - h)
    if max(left, right) > MAX_MARGIN * w or max(top, bottom) > MAX_MARGIN * h:
        return None
    return pad_nhwc(x, top, bottom, left, right, border), left, top, "border", True


def _points(
    x: torch.Tensor,
    sample: torch.Tensor,
    sx: torch.Tensor,
    sy: torch.Tensor,
    border: int,
    cval: list[float],
) -> torch.Tensor:
    """cv2's uint8 bilinear value, every channel, of ``K`` points of given samples: (K, C)."""
    _n, h, w, c = x.shape
    fx, fy = torch.floor(sx), torch.floor(sy)
    ax, ay = (sx - fx).unsqueeze(1), (sy - fy).unsqueeze(1)
    ix, iy = fx.long(), fy.long()
    fill = saturate(torch.tensor(cval, dtype=torch.float64), x.dtype).to(x.device).float()

    def tap(dx: int, dy: int) -> torch.Tensor:
        bx, by = torch_border(ix + dx, w, border), torch_border(iy + dy, h, border)
        inside = (bx >= 0) & (by >= 0)
        values = x[sample, by.clamp(min=0), bx.clamp(min=0)].float()
        return torch.where(inside.unsqueeze(1), values, fill.view(1, c))

    v0 = _lerp64(tap(0, 0), tap(1, 0), ax)
    v1 = _lerp64(tap(0, 1), tap(1, 1), ax)
    return _lerp64(v0, v1, ay).round_().clamp_(0, 255).to(torch.uint8)


# -- the table path --------------------------------------------------------------------------


def remap_table(
    x: torch.Tensor, sx: torch.Tensor, sy: torch.Tensor, border: int, cval: list[float]
) -> torch.Tensor | None:
    """The table path of the module docstring: ``(N, P, C)``, planar in memory."""
    n, h, w, c = x.shape
    span_x, span_y = _span(sx), _span(sy)
    if span_x is None or span_y is None:
        return None
    fx, fy = torch.floor(sx), torch.floor(sy)
    lo_x, hi_x = span_x
    lo_y, hi_y = span_y
    if hi_x - lo_x > MAX_MARGIN * (w + 2) or hi_y - lo_y > MAX_MARGIN * (h + 2):
        return None  # coordinates far outside (a perspective's horizon): tables too long
    if border == BORDER_CONSTANT:
        fill = saturate(torch.tensor(cval, dtype=torch.float64), x.dtype).to(x.device)
        src = torch.empty((n, h + 2, w + 2, c), dtype=x.dtype, device=x.device)
        src[:] = fill.view(1, 1, 1, c)
        src[:, 1:-1, 1:-1] = x
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
    b = sx.shape[0]
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

"""Torch backends of PIL.ImageOps, and the batch function of ``Image.filter`` for the filters that
are not convolution kernels (:mod:`.filter` declares the op), on PILBatch.

Pillow's integer arithmetic is reproduced: lookup tables of ImageOps built per sample and band
from torch histograms with Pillow's formulas; BoxBlur and GaussianBlur as Pillow's fixed-point
(24-bit) box passes with edge replication, fractional radius, horizontal then vertical and uint8
rounding between passes (GaussianBlur: three box passes of Pillow's radius); rank filters
(Median/Min/Max) on an edge-replicated border; 3x3 and 5x5 kernels (BLUR, SHARPEN, SMOOTH,
EDGE_ENHANCE, ..., ``ImageFilter.Kernel``) in float32 in Pillow's order with its untouched border.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from codedag.backends.ops.pil._adapter import op
from codedag.backends.ops.pil._batch import (
    BICUBIC,
    FLIP_LEFT_RIGHT,
    FLIP_TOP_BOTTOM,
    PILBatch,
    _batch,
    ink,
)
from codedag.backends.ops.pil.image import (
    convert,
    resample_refusal,
    resize,
    size_refusal,
    transpose,
)
from codedag.errors import UnsupportedOperation


def _lut_modes(img: PILBatch, name: str) -> None:
    if img.mode not in ("L", "RGB"):
        raise UnsupportedOperation(f"ImageOps.{name} supports L and RGB; got {img.mode}")


def _apply_lut(img: PILBatch, lut: torch.Tensor) -> PILBatch:
    """Apply per-sample, per-band tables ``lut`` (N, C, 256) to the batch."""
    x = img.bands().to(torch.int64)
    n, h, w, c = x.shape
    flat = x.permute(0, 3, 1, 2).reshape(n, c, h * w)
    out = (
        torch.gather(lut.clamp(0, 255).to(torch.uint8), 2, flat)
        .reshape(n, c, h, w)
        .permute(0, 2, 3, 1)
    )
    return img.with_bands(out.contiguous())


def _histogram(img: PILBatch) -> torch.Tensor:
    """(N, C, 256) int64 histograms, as ``Image.histogram()`` per sample."""
    x = img.bands().to(torch.int64)
    n, h, w, c = x.shape
    flat = x.permute(0, 3, 1, 2).reshape(n, c, h * w)
    hist = torch.zeros(n, c, 256, dtype=torch.int64, device=x.device)
    return hist.scatter_add_(2, flat, torch.ones_like(flat))


def flip(image: PILBatch) -> PILBatch:
    """``PIL.ImageOps.flip``: top to bottom."""
    return transpose(image, FLIP_TOP_BOTTOM)


def mirror(image: PILBatch) -> PILBatch:
    """``PIL.ImageOps.mirror``: left to right."""
    return transpose(image, FLIP_LEFT_RIGHT)


def grayscale(image: PILBatch) -> PILBatch:
    """``PIL.ImageOps.grayscale``: ``convert("L")``."""
    return convert(image, "L")


def _table(img: PILBatch, fn: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
    x = img.bands()
    i = torch.arange(256, device=x.device)
    return fn(i).expand(x.shape[0], x.shape[-1], 256)


def invert(image: PILBatch) -> PILBatch:
    """``PIL.ImageOps.invert``: 255 - value (L and RGB, as Pillow)."""
    img = _batch(image)
    _lut_modes(img, "invert")
    return _apply_lut(img, _table(img, lambda i: 255 - i))


def posterize(image: PILBatch, bits: int) -> PILBatch:
    """``PIL.ImageOps.posterize``: keep the ``bits`` high bits."""
    img = _batch(image)
    _lut_modes(img, "posterize")
    mask = ~(2 ** (8 - int(bits)) - 1)
    return _apply_lut(img, _table(img, lambda i: i & mask))


def solarize(image: PILBatch, threshold: int = 128) -> PILBatch:
    """``PIL.ImageOps.solarize``: invert values at or above ``threshold``."""
    img = _batch(image)
    _lut_modes(img, "solarize")
    return _apply_lut(img, _table(img, lambda i: torch.where(i < threshold, i, 255 - i)))


def autocontrast(
    image: PILBatch,
    cutoff: float = 0,
    ignore: object = None,
    mask: object = None,
    preserve_tone: bool = False,
) -> PILBatch:
    """``PIL.ImageOps.autocontrast`` with its defaults: stretch each band's [lo, hi] to [0, 255]."""
    img = _batch(image)
    _lut_modes(img, "autocontrast")
    if cutoff or ignore is not None or mask is not None or preserve_tone:
        raise UnsupportedOperation("autocontrast supports cutoff=0, no ignore, mask, preserve_tone")
    hist = _histogram(img)
    i = torch.arange(256, device=hist.device)
    present = hist > 0
    lo = torch.where(present, i, 256).amin(-1, keepdim=True)
    hi = torch.where(present, i, -1).amax(-1, keepdim=True)
    # The (N, C, 256) table is computed in NumPy, multiply then add as Pillow's Python does:
    # a fused multiply-add in a vectorized torch kernel can move int(ix * scale + offset) by one.
    lo_np, hi_np = lo.cpu().numpy().astype(np.float64), hi.cpu().numpy().astype(np.float64)
    span = np.where(hi_np > lo_np, hi_np - lo_np, 1.0)
    scale = 255.0 / span
    offset = -lo_np * scale
    ix = np.arange(256, dtype=np.float64)
    mapped = np.clip(np.trunc(np.multiply(ix, scale) + offset), 0, 255)
    lut = np.where(hi_np > lo_np, mapped, np.broadcast_to(ix, mapped.shape))
    return _apply_lut(img, torch.from_numpy(lut.astype(np.int64)).to(hist.device))


def equalize(image: PILBatch, mask: object = None) -> PILBatch:
    """``PIL.ImageOps.equalize``: Pillow's cumulative-histogram table per sample and band."""
    img = _batch(image)
    _lut_modes(img, "equalize")
    if mask is not None:
        raise UnsupportedOperation("equalize(mask=...) is not supported")
    hist = _histogram(img)
    i = torch.arange(256, device=hist.device)
    nonzero = (hist > 0).sum(-1, keepdim=True)
    last = torch.where(hist > 0, i, -1).amax(-1, keepdim=True).clamp(min=0)
    step = (hist.sum(-1, keepdim=True) - hist.gather(-1, last)) // 255
    before = torch.cumsum(hist, -1) - hist  # counts strictly below each value
    safe = torch.where(step > 0, step, torch.ones_like(step))
    lut = (step // 2 + before) // safe
    keep = (nonzero <= 1) | (step == 0)
    return _apply_lut(img, torch.where(keep, i.expand_as(lut), lut))


def _fill_values(fill: object, mode: str) -> list[int]:
    values = ink(fill, mode)
    if isinstance(values, str):
        raise UnsupportedOperation(values)
    return values


def _place(img: PILBatch, size: tuple[int, int], left: int, top: int, fill: object) -> PILBatch:
    """``img`` pasted at (left, top) on a new ``size`` canvas of ``fill``."""
    x = img.bands()
    n, h, w, c = x.shape
    color = torch.tensor(_fill_values(fill, img.mode), dtype=torch.uint8, device=x.device)
    out = color.expand(n, size[1], size[0], c).clone()
    out[:, top : top + h, left : left + w] = x
    return img.with_bands(out)


def _contain_size(w: int, h: int, size: tuple[int, int]) -> tuple[int, int]:
    """The size ``ImageOps.contain`` resizes a w x h image to for ``size``."""
    im_ratio, dest_ratio = w / h, size[0] / size[1]
    if im_ratio != dest_ratio:
        if im_ratio > dest_ratio:
            new_height = round(h / w * size[0])
            if new_height != size[1]:
                size = (size[0], new_height)
        else:
            new_width = round(w / h * size[1])
            if new_width != size[0]:
                size = (new_width, size[1])
    return size


def contain(image: PILBatch, size: tuple[int, int], method: int = BICUBIC) -> PILBatch:
    """``PIL.ImageOps.contain``: the largest resize of the same aspect ratio within ``size``."""
    img = _batch(image)
    w, h = img.size
    return resize(img, _contain_size(w, h, (int(size[0]), int(size[1]))), method)


def pad(
    image: PILBatch,
    size: tuple[int, int],
    method: int = BICUBIC,
    color: object = None,
    centering: tuple[float, float] = (0.5, 0.5),
) -> PILBatch:
    """``PIL.ImageOps.pad``: ``contain`` then centre on a ``color`` canvas of ``size``."""
    resized = contain(image, size, method)
    size = (int(size[0]), int(size[1]))
    rw, rh = resized.size
    if (rw, rh) == size:
        return resized
    if rw != size[0]:
        left = round((size[0] - rw) * max(0, min(centering[0], 1)))
        return _place(resized, size, left, 0, color)
    top = round((size[1] - rh) * max(0, min(centering[1], 1)))
    return _place(resized, size, 0, top, color)


def fit(
    image: PILBatch,
    size: tuple[int, int],
    method: int = BICUBIC,
    bleed: float = 0.0,
    centering: tuple[float, float] = (0.5, 0.5),
) -> PILBatch:
    """``PIL.ImageOps.fit``: crop to the aspect ratio of ``size`` (Pillow's box), then resize."""
    img = _batch(image)
    cx, cy = centering
    cx = cx if 0.0 <= cx <= 1.0 else 0.5
    cy = cy if 0.0 <= cy <= 1.0 else 0.5
    bleed = bleed if 0.0 <= bleed < 0.5 else 0.0
    w, h = img.size
    bleed_px = (bleed * w, bleed * h)
    live = (w - bleed_px[0] * 2, h - bleed_px[1] * 2)
    live_ratio, out_ratio = live[0] / live[1], size[0] / size[1]
    if live_ratio == out_ratio:
        crop_w, crop_h = live
    elif live_ratio >= out_ratio:
        crop_w, crop_h = out_ratio * live[1], live[1]
    else:
        crop_w, crop_h = live[0], live[0] / out_ratio
    left = bleed_px[0] + (live[0] - crop_w) * cx
    top = bleed_px[1] + (live[1] - crop_h) * cy
    return resize(img, size, method, box=(left, top, left + crop_w, top + crop_h))


def expand(image: PILBatch, border: object = 0, fill: object = 0) -> PILBatch:
    """``PIL.ImageOps.expand``: a border of ``fill`` (int, or a tuple per band)."""
    img = _batch(image)
    if isinstance(border, tuple) and len(border) == 2:
        left, top = border
        right, bottom = border
    elif isinstance(border, tuple) and len(border) == 4:
        left, top, right, bottom = border
    elif isinstance(border, int):
        left = top = right = bottom = border
    else:
        raise UnsupportedOperation(f"border {border!r}; expected an int or a 2/4-tuple")
    w, h = img.size
    return _place(img, (w + left + right, h + top + bottom), left, top, fill)


# --- ImageFilter ------------------------------------------------------------------------------


def _box_pass(x: torch.Tensor, radius: float, dim: int) -> torch.Tensor:
    """Pillow's ImagingHorizontalBoxBlur along ``dim`` of (N, H, W, C) uint8 data."""
    r = int(radius)
    ww = int(np.float32(1 << 24) / (np.float32(radius) * np.float32(2) + np.float32(1)))
    fw = ((1 << 24) - (r * 2 + 1) * ww) // 2
    size = x.shape[dim]
    idx = torch.arange(-r - 1, size + r + 1, device=x.device).clamp(0, size - 1)
    padded = x.index_select(dim, idx).to(torch.float64)
    csum = torch.cumsum(padded, dim=dim)
    zero = torch.zeros_like(csum.narrow(dim, 0, 1))
    csum = torch.cat([zero, csum], dim=dim)
    # window [x - r, x + r] lies at padded positions [x + 1, x + 2r + 1]
    inner = csum.narrow(dim, 2 * r + 2, size) - csum.narrow(dim, 1, size)
    far = padded.narrow(dim, 0, size) + padded.narrow(dim, 2 * r + 2, size)
    bulk = inner * ww + far * fw
    return torch.floor((bulk + (1 << 23)) / float(1 << 24)).to(torch.uint8)


def _box_blur(x: torch.Tensor, xradius: float, yradius: float, passes: int) -> torch.Tensor:
    for _ in range(passes if xradius != 0 else 0):
        x = _box_pass(x, xradius, 2)
    for _ in range(passes if yradius != 0 else 0):
        x = _box_pass(x, yradius, 1)
    return x


def _gaussian_radius(radius: float, passes: int) -> float:
    """Pillow's _gaussian_blur_radius, in its float32/double mix."""
    f = np.float32
    sigma2 = f(radius) * f(radius) / f(passes)
    big_l = f(math.sqrt(12.0 * float(sigma2) + 1.0))
    small_l = f(math.floor((float(big_l) - 1.0) / 2.0))
    a = (f(2) * small_l + f(1)) * (small_l * (small_l + f(1)) - f(3) * sigma2)
    a = a / (f(6) * (sigma2 - (small_l + f(1)) * (small_l + f(1))))
    return float(small_l + a)


def _radii(radius: Any) -> tuple[float, float]:
    xy = (radius, radius) if isinstance(radius, (int, float)) else tuple(radius)
    return float(np.float32(xy[0])), float(np.float32(xy[1]))


def _kernel_filter(
    x: torch.Tensor, size: tuple[int, int], scale: float, offset: float, kernel: Any
):
    if tuple(size) not in ((3, 3), (5, 5)):
        raise UnsupportedOperation(f"kernel size {size}; Pillow supports 3x3 and 5x5")
    k = size[0]
    half = k // 2
    if scale == 0:
        scale = 1
    weights = np.asarray([np.float32(float(v) / scale) for v in kernel], dtype=np.float32)
    w = torch.from_numpy(weights.reshape(k, k)).to(x.device)
    n, h, wd, c = x.shape
    if h < k or wd < k:
        return x.clone()
    src = x.to(torch.float32)
    ss = torch.full(
        (n, h - 2 * half, wd - 2 * half, c), float(np.float32(offset) + np.float32(0.5))
    )
    ss = ss.to(x.device)
    # Pillow sums rows from y + half down to y - half, each row left to right, in float32.
    for row in range(k):
        dy = half - row
        line = src[:, half + dy : h - half + dy]
        acc = line[:, :, 0 : wd - 2 * half] * w[row, 0]
        for col in range(1, k):
            acc = acc + line[:, :, col : wd - 2 * half + col] * w[row, col]
        ss = ss + acc
    out = x.clone()
    out[:, half : h - half, half : wd - half] = ss.clamp(0, 255).to(torch.uint8)
    return out


def _rank_filter(x: torch.Tensor, size: int, rank: int) -> torch.Tensor:
    half = size // 2
    n, h, w, c = x.shape
    yi = torch.arange(-half, h + half, device=x.device).clamp(0, h - 1)
    xi = torch.arange(-half, w + half, device=x.device).clamp(0, w - 1)
    padded = x.index_select(1, yi).index_select(2, xi)
    windows = padded.unfold(1, size, 1).unfold(2, size, 1)  # (N, H, W, C, size, size)
    flat = windows.reshape(n, h, w, c, size * size)
    return flat.sort(dim=-1).values[..., rank]


def filter_(self: PILBatch, filter: object) -> PILBatch:
    """``PIL.Image.Image.filter`` with BoxBlur, GaussianBlur, Median/Min/Max/RankFilter, kernels."""
    from PIL import ImageFilter

    img = _batch(self)
    if isinstance(filter, type):
        filter = filter()
    x = img.bands()
    if isinstance(filter, (ImageFilter.BoxBlur, ImageFilter.GaussianBlur)):
        rx, ry = _radii(filter.radius)
        if (rx, ry) == (0.0, 0.0):
            return PILBatch(img.data.clone(), img.mode)
        if isinstance(filter, ImageFilter.BoxBlur):
            return img.with_bands(_box_blur(x, rx, ry, 1))
        return img.with_bands(_box_blur(x, _gaussian_radius(rx, 3), _gaussian_radius(ry, 3), 3))
    if isinstance(filter, ImageFilter.UnsharpMask):
        r = float(np.float32(filter.radius))
        blurred = _box_blur(x, _gaussian_radius(r, 3), _gaussian_radius(r, 3), 3)
        src = x.to(torch.int32)
        diff = src - blurred.to(torch.int32)
        step = torch.div(diff * int(filter.percent), 100, rounding_mode="trunc")  # C division
        sharp = (src + step).clamp(0, 255)
        out = torch.where(diff.abs() > int(filter.threshold), sharp, src)
        return img.with_bands(out.to(torch.uint8))
    if isinstance(filter, ImageFilter.RankFilter):
        return img.with_bands(_rank_filter(x, int(filter.size), int(filter.rank)))
    if isinstance(filter, (ImageFilter.Kernel, ImageFilter.BuiltinFilter)):
        size, scale, offset, kernel = filter.filterargs
        return img.with_bands(_kernel_filter(x, size, scale, offset, kernel))
    raise UnsupportedOperation(f"filter {type(filter).__name__} is not supported")


# --- declared domains: what the backends leave to Pillow, checked before they run -------------

_LUT_MODES = frozenset({"L", "RGB"})  # ImageOps' point() tables; Pillow raises OSError otherwise


def _autocontrast_check(
    image: object,
    cutoff: object = 0,
    ignore: object = None,
    mask: object = None,
    preserve_tone: object = False,
) -> str | None:
    if cutoff or ignore is not None or mask is not None or preserve_tone:
        return "autocontrast with cutoff, ignore, mask or preserve_tone is left to Pillow"
    return None


def _equalize_check(image: object, mask: object = None) -> str | None:
    return None if mask is None else "equalize(mask=...) is left to Pillow"


def _posterize_check(image: object, bits: object) -> str | None:
    if isinstance(bits, int) and 1 <= bits <= 8:
        return None
    return f"bits {bits!r}: expected an int in 1..8 (Pillow raises ValueError)"


def _contain_check(image: Any, size: Any, method: Any = BICUBIC) -> str | None:
    reason = size_refusal(size) or resample_refusal(method)
    width, height = image.size
    if reason is None and 0 in _contain_size(width, height, (int(size[0]), int(size[1]))):
        reason = f"contain to {size!r} gives an empty image"
    return reason


def _pad_check(
    image: Any, size: Any, method: Any = BICUBIC, color: Any = None, centering: Any = (0.5, 0.5)
) -> str | None:
    reason = _contain_check(image, size, method)
    values = ink(color, image.mode)
    return reason or (values if isinstance(values, str) else None)


def _fit_check(
    image: object,
    size: object,
    method: object = BICUBIC,
    bleed: object = 0.0,
    centering: object = (0.5, 0.5),
) -> str | None:
    return size_refusal(size) or resample_refusal(method)


def _expand_check(image: Any, border: Any = 0, fill: Any = 0) -> str | None:
    sides = (border,) * 4 if isinstance(border, int) else border
    if not (isinstance(sides, tuple) and len(sides) in (2, 4)):
        return f"border {border!r}: expected an int or a 2- or 4-tuple"
    if not all(isinstance(v, int) and v >= 0 for v in sides):
        return f"border {border!r}: negative or non-int sides are left to Pillow"
    values = ink(fill, image.mode)
    return values if isinstance(values, str) else None


OPS = [
    op("PIL.ImageOps.autocontrast", autocontrast, dtypes=_LUT_MODES, check=_autocontrast_check),
    op("PIL.ImageOps.contain", contain, check=_contain_check),
    op("PIL.ImageOps.fit", fit, check=_fit_check),
    op("PIL.ImageOps.pad", pad, check=_pad_check),
    op("PIL.ImageOps.equalize", equalize, dtypes=_LUT_MODES, check=_equalize_check),
    op("PIL.ImageOps.expand", expand, check=_expand_check),
    op("PIL.ImageOps.flip", flip),
    op("PIL.ImageOps.grayscale", grayscale),
    op("PIL.ImageOps.invert", invert, dtypes=_LUT_MODES),
    op("PIL.ImageOps.mirror", mirror),
    op("PIL.ImageOps.posterize", posterize, dtypes=_LUT_MODES, check=_posterize_check),
    op("PIL.ImageOps.solarize", solarize, dtypes=_LUT_MODES),
]

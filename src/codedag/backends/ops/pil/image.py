"""Torch backends of PIL.Image: resize, convert, transpose, crop, on :class:`~._batch.PILBatch`;
rotate lives in :mod:`.rotate`, ImageOps in :mod:`.imageops`, ``Image.filter`` in :mod:`.filter`.
Pillow's integer arithmetic is reproduced bit for bit.

``resize`` follows Pillow's ``Resample.c``: a separable pass per axis (horizontal first, rounded
to uint8 in between) with support-scaled filters when downscaling (antialiasing), coefficients
normalized per output pixel and quantized to fixed point exactly as Pillow does; each output
sums only its taps (the filter's support) in int32 as Pillow's own sums do, so results are
bit-identical.
LA/RGBA are premultiplied by alpha around the resampling as Pillow does.
"""

from __future__ import annotations

import functools
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from codedag.backends.ops.pil._adapter import op
from codedag.backends.ops.pil._batch import (
    BANDS,
    BICUBIC,
    BILINEAR,
    BOX,
    FLIP_LEFT_RIGHT,
    FLIP_TOP_BOTTOM,
    HAMMING,
    LANCZOS,
    NEAREST,
    ROTATE_90,
    ROTATE_180,
    ROTATE_270,
    TRANSPOSE,
    TRANSVERSE,
    PILBatch,
    _batch,
    _premultiply,
    _unpremultiply,
)
from codedag.errors import UnsupportedOperation

# --- resampling filters of Pillow's Resample.c ------------------------------------------------


def _box(x: np.ndarray) -> np.ndarray:
    return ((x > -0.5) & (x <= 0.5)).astype(np.float64)


def _bilinear(x: np.ndarray) -> np.ndarray:
    x = np.abs(x)
    return np.where(x < 1.0, 1.0 - x, 0.0)


# Scalar libm sin/cos (as Pillow's C calls them): NumPy's SIMD versions can differ by an ulp.
@np.vectorize
def _hamming(x: float) -> float:
    x = abs(x)
    if x == 0.0:
        return 1.0
    if x >= 1.0:
        return 0.0
    px = x * math.pi
    return math.sin(px) / px * (0.54 + 0.46 * math.cos(px))


def _bicubic(x: np.ndarray) -> np.ndarray:
    a = -0.5
    x = np.abs(x)
    near = ((a + 2.0) * x - (a + 3.0)) * x * x + 1
    far = (((x - 5) * x + 8) * x - 4) * a
    return np.where(x < 1.0, near, np.where(x < 2.0, far, 0.0))


def _sinc(x: float) -> float:
    if x == 0.0:
        return 1.0
    px = x * math.pi
    return math.sin(px) / px


@np.vectorize
def _lanczos(x: float) -> float:
    return _sinc(x) * _sinc(x / 3) if -3.0 <= x < 3.0 else 0.0


_FILTERS: dict[int, tuple[Callable[[np.ndarray], np.ndarray], float]] = {
    BOX: (_box, 0.5),
    BILINEAR: (_bilinear, 1.0),
    HAMMING: (_hamming, 1.0),
    BICUBIC: (_bicubic, 2.0),
    LANCZOS: (_lanczos, 3.0),
}
_PRECISION_BITS = 32 - 8 - 2


@functools.lru_cache(maxsize=128)
def _coeffs(
    in_size: int, in0: float, in1: float, out_size: int, resample: int
) -> tuple[np.ndarray, np.ndarray, int]:
    """Pillow's precompute_coeffs + normalize_coeffs_8bpc as taps: for each output position the
    input positions it reads (int64) and their fixed-point weights (int32), ``(out, taps)``
    arrays padded with weight 0, and the bits of the fixed point.

    The precision is the largest (below 22 bits) at which the largest coefficient of the pass
    still fits 15 bits, as Pillow's SIMD-ready normalization chooses it.
    """
    fn, fsupport = _FILTERS[resample]
    scale = float(np.float32(in1) - np.float32(in0)) / out_size  # Pillow's box is float32
    in0 = float(np.float32(in0))
    filterscale = max(scale, 1.0)
    support = fsupport * filterscale
    rows = []
    for xx in range(out_size):
        center = in0 + (xx + 0.5) * scale
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), in_size) - xmin
        if xmax <= 0:
            continue
        w = fn((np.arange(xmax) + xmin - center + 0.5) * (1.0 / filterscale))
        ww = float(np.cumsum(w)[-1])  # sequential, as Pillow's ww += w
        if ww != 0.0:
            w = w / ww
        rows.append((xx, xmin, w))
    bits = _PRECISION_BITS
    taps = max((len(w) for _, _, w in rows), default=1)
    index = np.zeros((out_size, taps), dtype=np.int64)
    weights = np.zeros((out_size, taps), dtype=np.int32)
    for xx, xmin, w in rows:
        fixed = np.where(w < 0, np.trunc(-0.5 + w * (1 << bits)), np.trunc(0.5 + w * (1 << bits)))
        index[xx, : len(w)] = np.arange(xmin, xmin + len(w))
        weights[xx, : len(w)] = fixed.astype(np.int32)
    return index, weights, bits


@functools.lru_cache(maxsize=64)
def _device_taps(key: tuple[Any, ...], device: str) -> tuple[torch.Tensor, torch.Tensor]:
    """The taps of ``_coeffs(*key)``, each column its own tensor kept on ``device``."""
    index, weights, _ = _coeffs(*key)
    return torch.from_numpy(index.T.copy()).to(device), torch.from_numpy(weights.T.copy()).to(
        device
    )


def _resample_axis(x: torch.Tensor, key: tuple[Any, ...], dim: int) -> torch.Tensor:
    """One Pillow pass along ``dim`` of (N, H, W, C) uint8 data: fixed-point sums, round, clip.

    Each output position sums its few taps (the filter's support) in int32, as Pillow does:
    work in proportion to the taps, not to the whole input row a dense coefficient matrix
    would multiply, and whole rows or pixels gathered at a time in the data's own layout.
    """
    bits = _coeffs(*key)[2]
    index, weights = _device_taps(key, str(x.device))
    along = [1] * x.dim()
    along[dim] = -1
    wide = x.to(torch.int32)
    acc = wide.index_select(dim, index[0]) * weights[0].view(along) + (1 << (bits - 1))
    for tap in range(1, index.shape[0]):
        acc += wide.index_select(dim, index[tap]) * weights[tap].view(along)
    return (acc >> bits).clamp_(0, 255).to(torch.uint8)


def _nearest_index(in_size: int, in0: float, in1: float, out_size: int, device: Any) -> Any:
    """Pillow's ImagingScaleAffine: a position accumulated step by step in double, truncated.

    Returns source indices, -1 where Pillow writes 0 (outside the source).
    """
    scale = float(np.float32(in1) - np.float32(in0)) / out_size
    steps = np.full(out_size, scale)
    steps[0] = float(np.float32(in0)) + scale * 0.5
    pos = np.cumsum(steps)  # sequential, as Pillow's xo += a[0]
    idx = np.where(pos < 0, -1, pos.astype(np.int64))
    idx = np.where(idx < in_size, idx, -1)
    return torch.from_numpy(idx).to(device)


def resize(
    self: PILBatch,
    size: Sequence[int],
    resample: int | None = None,
    box: Sequence[float] | None = None,
    reducing_gap: float | None = None,
) -> PILBatch:
    """``PIL.Image.Image.resize`` with NEAREST, BOX, BILINEAR, HAMMING, BICUBIC or LANCZOS."""
    img = _batch(self)
    resample = BICUBIC if resample is None else int(resample)
    if resample != NEAREST and resample not in _FILTERS:
        raise UnsupportedOperation(f"resample={resample}; expected one of 0..5 (Pillow filters)")
    if reducing_gap is not None:
        raise UnsupportedOperation("reducing_gap (a reduce() before resampling) is not supported")
    w, h = img.size
    box = (0, 0, w, h) if box is None else tuple(float(b) for b in box)
    out_w, out_h = (int(s) for s in size)
    if out_w <= 0 or out_h <= 0:
        raise UnsupportedOperation(f"size {size!r} must be positive")
    if (out_w, out_h) == (w, h) and tuple(box) == (0, 0, w, h):
        return PILBatch(img.data.clone(), img.mode)
    x = img.bands()
    if resample == NEAREST:
        xi = _nearest_index(w, box[0], box[2], out_w, x.device)
        yi = _nearest_index(h, box[1], box[3], out_h, x.device)
        out = x.index_select(1, yi.clamp(min=0)).index_select(2, xi.clamp(min=0))
        inside = (yi >= 0)[None, :, None, None] & (xi >= 0)[None, None, :, None]
        return img.with_bands(torch.where(inside, out, torch.zeros_like(out)))
    premult = img.mode in ("LA", "RGBA")
    if premult:
        x = _premultiply(x)
    passes = []
    if out_w != w or box[0] != 0 or box[2] != w:
        passes.append(((w, box[0], box[2], out_w, resample), 2))
    if out_h != h or box[1] != 0 or box[3] != h:
        passes.append(((h, box[1], box[3], out_h, resample), 1))
    # Pillow 13 runs the vertical pass first when the height shrinks by more than twice as many
    # pixels as the width (python-pillow/Pillow#9549); the order changes the uint8 rounding.
    if out_h < h and (h - out_h) > 2 * (w - out_w):
        passes.reverse()
    for key, dim in passes:
        x = _resample_axis(x, key, dim=dim)
    if premult:
        x = _unpremultiply(x)
    return img.with_bands(x)


def _luma(rgb: torch.Tensor) -> torch.Tensor:
    """Pillow's L24: (R*19595 + G*38470 + B*7471 + 0x8000) >> 16, i.e. 299/587/114 rounded."""
    c = rgb.to(torch.int32)
    return ((c[..., 0] * 19595 + c[..., 1] * 38470 + c[..., 2] * 7471 + 0x8000) >> 16).to(
        torch.uint8
    )


def convert(
    self: PILBatch,
    mode: str | None = None,
    matrix: object = None,
    dither: object = None,
    palette: object = None,
    colors: int = 256,
) -> PILBatch:
    """``PIL.Image.Image.convert`` between L, LA, RGB and RGBA (alpha dropped, not composited)."""
    img = _batch(self)
    if matrix is not None:
        raise UnsupportedOperation("convert(matrix=...) is not supported")
    mode = mode or img.mode
    if mode not in BANDS:
        raise UnsupportedOperation(f"convert to {mode!r}; expected one of {sorted(BANDS)}")
    x = img.bands()
    if mode == img.mode:
        return PILBatch(img.data.clone(), mode)
    gray = x[..., 0] if img.mode in ("L", "LA") else _luma(x)
    alpha = x[..., -1] if img.mode in ("LA", "RGBA") else torch.full_like(gray, 255)
    if mode == "L":
        return PILBatch(gray.clone(), mode)
    if mode == "LA":
        return PILBatch(torch.stack([gray, alpha], dim=-1), mode)
    rgb = x[..., :3] if img.mode in ("RGB", "RGBA") else gray.unsqueeze(-1).expand(*gray.shape, 3)
    if mode == "RGB":
        return PILBatch(rgb.contiguous(), mode)
    return PILBatch(torch.cat([rgb, alpha.unsqueeze(-1)], dim=-1), mode)


def transpose(self: PILBatch, method: int) -> PILBatch:
    """``PIL.Image.Image.transpose``: flips, rotations by 90 degrees, transpose, transverse."""
    img = _batch(self)
    x = img.bands()
    ops: dict[int, Callable[[torch.Tensor], torch.Tensor]] = {
        FLIP_LEFT_RIGHT: lambda t: t.flip(2),
        FLIP_TOP_BOTTOM: lambda t: t.flip(1),
        ROTATE_90: lambda t: t.transpose(1, 2).flip(1),
        ROTATE_180: lambda t: t.flip(1, 2),
        ROTATE_270: lambda t: t.transpose(1, 2).flip(2),
        TRANSPOSE: lambda t: t.transpose(1, 2),
        TRANSVERSE: lambda t: t.transpose(1, 2).flip(1, 2),
    }
    if int(method) not in ops:
        raise UnsupportedOperation(f"transpose method {method!r}; expected 0..6")
    return img.with_bands(ops[int(method)](x).contiguous())


def crop(self: PILBatch, box: Sequence[float] | None = None) -> PILBatch:
    """``PIL.Image.Image.crop``: coordinates rounded as Pillow does, outside the image is 0."""
    img = _batch(self)
    if box is None:
        return PILBatch(img.data.clone(), img.mode)
    x0, y0, x1, y1 = (round(float(v)) for v in box)
    if x1 < x0 or y1 < y0:
        raise UnsupportedOperation(f"crop box {box!r} has negative size")
    x = img.bands()
    n, h, w, c = x.shape
    out = torch.zeros((n, y1 - y0, x1 - x0, c), dtype=x.dtype, device=x.device)
    sx0, sy0, sx1, sy1 = max(x0, 0), max(y0, 0), min(x1, w), min(y1, h)
    if sx1 > sx0 and sy1 > sy0:
        out[:, sy0 - y0 : sy1 - y0, sx0 - x0 : sx1 - x0] = x[:, sy0:sy1, sx0:sx1]
    return img.with_bands(out)


# --- declared domains: what the backends leave to Pillow, checked before they run -------------


def size_refusal(size: Any) -> str | None:
    """Why ``size`` is not a (width, height) pair of positive ints, or ``None``."""
    try:
        width, height = (operator.index(s) for s in size)
    except (TypeError, ValueError):
        return f"size {size!r}: expected two ints"
    if width <= 0 or height <= 0:
        return f"size {size!r} is not positive (Pillow raises ValueError)"
    return None


def resample_refusal(resample: Any) -> str | None:
    """Why ``resample`` is not one of Pillow's six filters, or ``None``."""
    if resample is None:
        return None
    try:
        value = operator.index(resample)
    except TypeError:
        return f"resample {resample!r}: expected a Resampling value"
    return None if value == NEAREST or value in _FILTERS else f"resample {value}: not 0..5"


def _resize_check(
    self: Any,
    size: Any,
    resample: Any = None,
    box: Any = None,
    reducing_gap: Any = None,
) -> str | None:
    if reducing_gap is not None:
        return "reducing_gap (a reduce() before resampling) is left to Pillow"
    reason = size_refusal(size) or resample_refusal(resample)
    if reason is None and box is not None:
        try:
            x0, y0, x1, y1 = (float(b) for b in box)
        except (TypeError, ValueError):
            return f"box {box!r}: expected four numbers"
        w, h = self.size
        if not (0 <= x0 < x1 <= w and 0 <= y0 < y1 <= h):
            return f"box {box!r} is empty or outside the {w}x{h} image (Pillow raises)"
    return reason


def _convert_check(
    self: object,
    mode: object = None,
    matrix: object = None,
    dither: object = None,
    palette: object = None,
    colors: int = 256,
) -> str | None:
    if matrix is not None:
        return "convert(matrix=...) is left to Pillow"
    if mode is not None and mode not in BANDS:
        return f"convert to {mode!r}; computed: {', '.join(sorted(BANDS))}"
    return None


def _transpose_check(self: Any, method: Any) -> str | None:
    try:
        valid = operator.index(method) in range(7)
    except TypeError:
        valid = False
    return None if valid else f"transpose method {method!r}; expected 0..6 (Pillow raises)"


def _crop_check(self: Any, box: Any = None) -> str | None:
    if box is None:
        return None
    try:
        x0, y0, x1, y1 = (float(v) for v in box)
    except (TypeError, ValueError):
        return f"crop box {box!r}: expected four numbers"
    if x1 < x0 or y1 < y0:
        return f"crop box {box!r} has a negative size (Pillow raises ValueError)"
    return None


OPS = [
    op("PIL.Image.Image.convert", convert, check=_convert_check),
    op("PIL.Image.Image.crop", crop, check=_crop_check),
    op("PIL.Image.Image.resize", resize, check=_resize_check),
    op("PIL.Image.Image.transpose", transpose, check=_transpose_check),
]

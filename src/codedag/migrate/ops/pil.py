"""Torch backends of PIL.Image: resize, convert, transpose, crop, rotate; ImageOps and ImageFilter
live in :mod:`.pil_ops`. Pillow's integer arithmetic is reproduced bit for bit.

Images travel as :class:`PILBatch`: a uint8 tensor (N, H, W, C) for multi-band modes or (N, H, W)
for single-band ones, plus the mode string; one PIL call is a batch of one. :func:`from_pil` and
:func:`to_pil` convert lists of equally sized ``PIL.Image.Image`` of one mode to and from it.
Modes: L, LA, RGB, RGBA (8 bits per band); others raise UnsupportedOperation.

``resize`` follows Pillow's ``Resample.c``: a separable pass per axis (horizontal first, rounded
to uint8 in between) with support-scaled filters when downscaling (antialiasing), coefficients
normalized per output pixel and quantized to fixed point exactly as Pillow does; the sums run
as float64 matrix products, which are exact for these integers, so results are bit-identical.
LA/RGBA are premultiplied by alpha around the resampling as Pillow does.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from codedag.errors import UnsupportedOperation

BANDS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}

# Pillow's Resampling / Transpose enum values (stable since Pillow 2): compared as ints.
NEAREST, LANCZOS, BILINEAR, BICUBIC, BOX, HAMMING = 0, 1, 2, 3, 4, 5
FLIP_LEFT_RIGHT, FLIP_TOP_BOTTOM, ROTATE_90, ROTATE_180, ROTATE_270, TRANSPOSE, TRANSVERSE = range(
    7
)


@dataclass(frozen=True)
class PILBatch:
    """N images of one PIL mode and size: uint8 (N, H, W, C), or (N, H, W) for single-band modes.

    ``size`` is PIL's (width, height). Build one from PIL images with :func:`from_pil`; turn it back
    into PIL images with :func:`to_pil`.
    """

    data: torch.Tensor
    mode: str

    def __post_init__(self) -> None:
        if self.mode not in BANDS:
            raise UnsupportedOperation(f"PIL mode {self.mode!r}; expected one of {sorted(BANDS)}")
        want = 3 if BANDS[self.mode] == 1 else 4
        if self.data.dtype != torch.uint8 or self.data.dim() != want:
            raise UnsupportedOperation(
                f"mode {self.mode} needs a uint8 tensor of {want} dims, got {self.data.dtype} "
                f"{tuple(self.data.shape)}"
            )
        if want == 4 and self.data.shape[-1] != BANDS[self.mode]:
            raise UnsupportedOperation(f"mode {self.mode} needs {BANDS[self.mode]} bands")

    @property
    def size(self) -> tuple[int, int]:
        """(width, height), as ``PIL.Image.Image.size``."""
        return int(self.data.shape[2]), int(self.data.shape[1])

    def bands(self) -> torch.Tensor:
        """The data as (N, H, W, C) whatever the mode."""
        return self.data if self.data.dim() == 4 else self.data.unsqueeze(-1)

    def with_bands(self, data: torch.Tensor, mode: str | None = None) -> PILBatch:
        """A batch of ``mode`` (default: this one) from (N, H, W, C) data."""
        mode = mode or self.mode
        return PILBatch(data[..., 0] if BANDS[mode] == 1 else data, mode)


def from_pil(images: Sequence[Any], device: torch.device | str = "cpu") -> PILBatch:
    """Stack equally sized PIL images of one mode into a :class:`PILBatch` on ``device``."""
    modes = {im.mode for im in images}
    sizes = {im.size for im in images}
    if len(modes) != 1 or len(sizes) != 1:
        raise UnsupportedOperation(f"a batch needs one mode and size, got {modes} and {sizes}")
    arr = np.stack([np.asarray(im) for im in images])
    return PILBatch(torch.from_numpy(arr).to(device), modes.pop())


def to_pil(batch: PILBatch) -> list[Any]:
    """The batch as a list of ``PIL.Image.Image``."""
    from PIL import Image

    arr = batch.data.cpu().numpy()
    return [Image.fromarray(a, mode=batch.mode) if False else Image.fromarray(a) for a in arr]


def _batch(image: Any) -> PILBatch:
    if not isinstance(image, PILBatch):
        raise UnsupportedOperation(f"received {type(image).__name__}; expected a PILBatch")
    return image


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
) -> tuple[np.ndarray, int]:
    """Pillow's precompute_coeffs + normalize_coeffs_8bpc: (out, in) fixed-point matrix, bits.

    The precision is the largest (below 22 bits) at which the largest coefficient of the pass
    still fits 15 bits, as Pillow's SIMD-ready normalization chooses it.
    """
    fn, fsupport = _FILTERS[resample]
    scale = float(np.float32(in1) - np.float32(in0)) / out_size  # Pillow's box is float32
    in0 = float(np.float32(in0))
    filterscale = max(scale, 1.0)
    support = fsupport * filterscale
    matrix = np.zeros((out_size, in_size), dtype=np.float64)
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
    for xx, xmin, w in rows:
        fixed = np.where(w < 0, np.trunc(-0.5 + w * (1 << bits)), np.trunc(0.5 + w * (1 << bits)))
        matrix[xx, xmin : xmin + len(w)] = fixed
    return matrix, bits


def _resample_axis(x: torch.Tensor, coeffs: tuple[np.ndarray, int], dim: int) -> torch.Tensor:
    """One Pillow pass along ``dim`` of (N, H, W, C) uint8 data: fixed-point sums, round, clip."""
    matrix, bits = coeffs
    m = torch.from_numpy(matrix).to(x.device)
    moved = x.movedim(dim, -1).to(torch.float64)
    acc = torch.matmul(moved, m.T) + float(1 << (bits - 1))
    out = torch.floor(acc / float(1 << bits)).clamp(0, 255)
    return out.to(torch.uint8).movedim(-1, dim)


def _premultiply(x: torch.Tensor) -> torch.Tensor:
    """RGBA -> RGBa (LA -> La): Pillow's MULDIV255 of the colour bands by alpha."""
    alpha = x[..., -1:].to(torch.int32)
    tmp = x[..., :-1].to(torch.int32) * alpha + 128
    color = ((tmp >> 8) + tmp) >> 8
    return torch.cat([color.to(torch.uint8), x[..., -1:]], dim=-1)


def _unpremultiply(x: torch.Tensor) -> torch.Tensor:
    """RGBa -> RGBA: 255 * c / alpha, clipped; alpha 0 or 255 keeps the colour as it is."""
    alpha = x[..., -1:].to(torch.int32)
    color = x[..., :-1].to(torch.int32)
    safe = torch.where(alpha == 0, torch.ones_like(alpha), alpha)
    scaled = torch.clamp((255 * color) // safe, max=255)
    keep = (alpha == 0) | (alpha == 255)
    color = torch.where(keep, color, scaled)
    return torch.cat([color.to(torch.uint8), x[..., -1:]], dim=-1)


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
        passes.append((_coeffs(w, box[0], box[2], out_w, resample), 2))
    if out_h != h or box[1] != 0 or box[3] != h:
        passes.append((_coeffs(h, box[1], box[3], out_h, resample), 1))
    # Pillow 13 runs the vertical pass first when the height shrinks by more than twice as many
    # pixels as the width (python-pillow/Pillow#9549); the order changes the uint8 rounding.
    if out_h < h and (h - out_h) > 2 * (w - out_w):
        passes.reverse()
    for coeffs, dim in passes:
        x = _resample_axis(x, coeffs, dim=dim)
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
    matrix: Any = None,
    dither: Any = None,
    palette: Any = None,
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


def _rotation_matrix(
    w: int, h: int, angle: float, expand: bool, center: Any, translate: Any
) -> tuple[list[float], int, int]:
    """The affine matrix and output size of ``Image.rotate`` (Pillow's own Python arithmetic)."""
    post_trans = (0, 0) if translate is None else translate
    if center is None:
        center = (w / 2, h / 2)
    rad = -math.radians(angle)
    matrix = [
        round(math.cos(rad), 15),
        round(math.sin(rad), 15),
        0.0,
        round(-math.sin(rad), 15),
        round(math.cos(rad), 15),
        0.0,
    ]

    def transform(x: float, y: float, m: list[float]) -> tuple[float, float]:
        a, b, c, d, e, f = m
        return a * x + b * y + c, d * x + e * y + f

    matrix[2], matrix[5] = transform(-center[0] - post_trans[0], -center[1] - post_trans[1], matrix)
    matrix[2] += center[0]
    matrix[5] += center[1]
    if expand:
        xx, yy = [], []
        for x, y in ((0, 0), (w, 0), (w, h), (0, h)):
            tx, ty = transform(x, y, matrix)
            xx.append(tx)
            yy.append(ty)
        nw = math.ceil(max(xx)) - math.floor(min(xx))
        nh = math.ceil(max(yy)) - math.floor(min(yy))
        matrix[2], matrix[5] = transform(-(nw - w) / 2.0, -(nh - h) / 2.0, matrix)
        w, h = nw, nh
    return matrix, w, h


def _affine(x: torch.Tensor, m: list[float], out_w: int, out_h: int, resample: int) -> Any:
    """Pillow's affine sampling of (N, H, W, C) uint8: values and a mask of pixels inside."""
    h, w = x.shape[1], x.shape[2]
    dev = x.device
    xs = torch.arange(out_w, dtype=torch.float64, device=dev) + 0.5
    ys = torch.arange(out_h, dtype=torch.float64, device=dev) + 0.5
    xin = m[0] * xs[None, :] + m[1] * ys[:, None] + m[2]
    yin = m[3] * xs[None, :] + m[4] * ys[:, None] + m[5]
    inside = (xin >= 0) & (xin < w) & (yin >= 0) & (yin < h)
    if resample == NEAREST:
        xi, yi = _nearest_affine(m, out_w, out_h, dev)
        inside = (xi >= 0) & (xi < w) & (yi >= 0) & (yi < h)
        return x[:, yi.clamp(0, h - 1), xi.clamp(0, w - 1)], inside
    xf, yf = xin - 0.5, yin - 0.5
    x0, y0 = torch.floor(xf), torch.floor(yf)
    dx, dy = (xf - x0)[None, :, :, None], (yf - y0)[None, :, :, None]
    x0, y0 = x0.long(), y0.long()
    img = x.to(torch.float64)

    def row(yy: torch.Tensor, offsets: range) -> list[torch.Tensor]:
        yc = yy.clamp(0, h - 1)
        return [img[:, yc, (x0 + o).clamp(0, w - 1)] for o in offsets]

    if resample == BILINEAR:
        rows = []
        for k in range(2):
            a, b = row(y0 + k, range(2))
            rows.append(a + (b - a) * dx)
        valid1 = ((y0 + 1 >= 0) & (y0 + 1 < h))[None, :, :, None]
        v2 = torch.where(valid1, rows[1], rows[0])
        v = rows[0] + (v2 - rows[0]) * dy
        return torch.floor(v).clamp(0, 255).to(torch.uint8), inside  # (UINT8) v truncates

    def cubic(v1: Any, v2: Any, v3: Any, v4: Any, d: torch.Tensor) -> torch.Tensor:
        p2 = -v1 + v3
        p3 = 2 * (v1 - v2) + v3 - v4
        p4 = -v1 + v2 - v3 + v4
        return v2 + d * (p2 + d * (p3 + d * p4))

    ystart = y0 - 1
    vals: list[torch.Tensor] = []
    for k in range(4):
        v = cubic(*row(ystart + k, range(-1, 3)), dx)
        if k > 0:
            valid = ((ystart + k >= 0) & (ystart + k < h))[None, :, :, None]
            v = torch.where(valid, v, vals[-1])
        vals.append(v)
    out = cubic(*vals, dy)
    return torch.floor(out).clamp(0, 255).to(torch.uint8), inside  # clipped, then truncated


def _nearest_affine(m: list[float], out_w: int, out_h: int, dev: Any) -> Any:
    """Source indices of Pillow's nearest affine: exact scaling path or 16.16 fixed point."""
    xs = torch.arange(out_w, dtype=torch.int64, device=dev)[None, :]
    ys = torch.arange(out_h, dtype=torch.int64, device=dev)[:, None]
    if m[1] == 0 and m[3] == 0:  # ImagingScaleAffine: (int) of an exactly accumulated double
        xo = m[2] + m[0] * 0.5 + m[0] * xs.double()
        yo = m[5] + m[4] * 0.5 + m[4] * ys.double()
        xi = torch.where(xo < 0, -1, xo.long())
        yi = torch.where(yo < 0, -1, yo.long())
        return xi.expand(out_h, out_w), yi.expand(out_h, out_w)

    def fits(px: int, py: int) -> bool:
        return abs(px * m[0] + py * m[1] + m[2]) < 32768.0 and (
            abs(px * m[3] + py * m[4] + m[5]) < 32768.0
        )

    if not all(fits(px, py) for px, py in ((0, 0), (out_w, out_h), (0, out_h), (out_w, 0))):
        raise UnsupportedOperation("images beyond Pillow's 16.16 fixed-point range")

    def fix(v: float) -> int:
        return math.floor(v * 65536.0 + 0.5)

    a0, a1, a3, a4 = fix(m[0]), fix(m[1]), fix(m[3]), fix(m[4])
    a2 = fix(m[2] + m[0] * 0.5 + m[1] * 0.5)
    a5 = fix(m[5] + m[3] * 0.5 + m[4] * 0.5)
    return (a2 + ys * a1 + xs * a0) >> 16, (a5 + ys * a4 + xs * a3) >> 16


def _fill(fillcolor: Any, bands: int, device: Any) -> torch.Tensor:
    if fillcolor is None:
        fillcolor = 0
    if isinstance(fillcolor, (int, float)):
        vals = [int(fillcolor)] * bands if bands == 1 else [int(fillcolor)] + [0] * (bands - 1)
    else:
        vals = [int(v) for v in fillcolor]
        if len(vals) == 3 and bands == 4:
            vals.append(255)
        if len(vals) != bands:
            raise UnsupportedOperation(f"fillcolor {fillcolor!r} for {bands} bands")
    return torch.tensor(vals, dtype=torch.uint8, device=device)


def rotate(
    self: PILBatch,
    angle: float,
    resample: int = NEAREST,
    expand: int | bool = 0,
    center: Sequence[float] | None = None,
    translate: Sequence[float] | None = None,
    fillcolor: Any = None,
) -> PILBatch:
    """``PIL.Image.Image.rotate`` (counter-clockwise degrees) with NEAREST, BILINEAR or BICUBIC."""
    img = _batch(self)
    resample = int(resample)
    if resample not in (NEAREST, BILINEAR, BICUBIC):
        raise UnsupportedOperation(f"rotate resample={resample}; expected NEAREST/BILINEAR/BICUBIC")
    angle = angle % 360.0
    w, h = img.size
    if not (center or translate):
        if angle == 0:
            return PILBatch(img.data.clone(), img.mode)
        if angle == 180:
            return transpose(img, ROTATE_180)
        if angle in (90, 270) and (expand or w == h):
            return transpose(img, ROTATE_90 if angle == 90 else ROTATE_270)
    matrix, out_w, out_h = _rotation_matrix(w, h, angle, bool(expand), center, translate)
    x = img.bands()
    premult = img.mode in ("LA", "RGBA") and resample != NEAREST
    if premult:
        x = _premultiply(x)
    vals, inside = _affine(x, matrix, out_w, out_h, resample)
    fill = _fill(fillcolor, x.shape[-1], x.device)  # written raw, also into RGBa, as Pillow does
    out = torch.where(inside[None, :, :, None], vals, fill)
    if premult:
        out = _unpremultiply(out)
    return img.with_bands(out)


BACKENDS: dict[str, Callable[..., Any]] = {
    "PIL.Image.Image.convert": convert,
    "PIL.Image.Image.crop": crop,
    "PIL.Image.Image.resize": resize,
    "PIL.Image.Image.rotate": rotate,
    "PIL.Image.Image.transpose": transpose,
}


def _register_ops() -> None:
    from codedag.migrate.ops import pil_ops

    BACKENDS.update(pil_ops.BACKENDS)


_register_ops()

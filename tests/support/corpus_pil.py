"""Conformance corpus of the PIL ops: every mode PIL has (L, LA, RGB, RGBA and the ones the
backends leave to Pillow: 1, P, I, F, CMYK, I;16), 1x1, one-row and empty images, and each
function's parameters (filters, sizes, boxes, angles, fill colours, degenerate values)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import strategies as st
from migrate_support import Args, Labeled
from PIL import Image, ImageFilter

MODES = ("L", "LA", "RGB", "RGBA", "1", "P", "I", "F", "CMYK", "I;16")
SIZES = ((16, 12), (1, 1), (7, 1), (0, 0), (0, 5))


def image(mode: str = "RGB", size: tuple[int, int] = (16, 12), seed: int = 0) -> Image.Image:
    """A deterministic random image of ``mode`` and ``size`` (width, height)."""
    rng = np.random.default_rng(seed)
    w, h = size
    bands = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4, "CMYK": 4}.get(mode)
    if bands is not None:
        data = rng.integers(0, 256, (h, w, bands), dtype=np.uint8)
        if w == 0 or h == 0:
            return Image.new(mode, size)
        return Image.fromarray(data[..., 0] if bands == 1 else data, mode=mode)
    base = Image.fromarray(rng.integers(0, 256, (max(h, 1), max(w, 1)), dtype=np.uint8))
    if w == 0 or h == 0:
        return Image.new(mode, size)
    return base.convert(mode)


Params = list[tuple[str, tuple[Any, ...], dict[str, Any]]]
_PIL: dict[str, Callable[[], Params]] = {}


def _pil(name: str) -> Callable[[Callable[[], Params]], Callable[[], Params]]:
    def register(params: Callable[[], Params]) -> Callable[[], Params]:
        _PIL[name] = params
        return params

    return register


@_pil("PIL.Image.Image.resize")
def _resize() -> Params:
    out: Params = [(f"filter {f}", ((9, 7),), {"resample": f}) for f in range(6)]
    return [
        *out,
        ("upscale", ((40, 30),), {}),
        ("box", ((8, 8),), {"box": (1.5, 2, 12, 10)}),
        ("reducing_gap", ((5, 5),), {"reducing_gap": 2.0}),
        ("box outside", ((8, 8),), {"box": (-1, 0, 12, 10)}),
        ("float size", ((8.5, 8),), {}),
        ("bad filter", ((8, 8),), {"resample": 9}),
        ("zero", ((0, 5),), {}),
        ("same", ((16, 12),), {}),
    ]


@_pil("PIL.Image.Image.convert")
def _convert() -> Params:
    return [(m, (m,), {}) for m in ("L", "LA", "RGB", "RGBA", "1", "P", "F")] + [
        ("none", (), {}),
        ("matrix", ("RGB",), {"matrix": (1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0)}),
    ]


@_pil("PIL.Image.Image.transpose")
def _transpose() -> Params:
    return [(f"method {m}", (m,), {}) for m in range(7)] + [("bad", (9,), {})]


@_pil("PIL.Image.Image.crop")
def _crop() -> Params:
    return [
        ("inside", ((2, 3, 10, 9),), {}),
        ("outside", ((-3, -2, 20, 15),), {}),
        ("float box", ((1.4, 2.6, 9.5, 7.5),), {}),
        ("empty", ((4, 4, 4, 4),), {}),
        ("negative size", ((8, 8, 2, 2),), {}),
        ("no box", (), {}),
    ]


@_pil("PIL.Image.Image.rotate")
def _rotate() -> Params:
    out: Params = [(f"angle {a}", (a,), {}) for a in (0, 90, 180, 270, 30, -45.5)]
    return [
        *out,
        ("bilinear", (30,), {"resample": Image.Resampling.BILINEAR}),
        ("bicubic expand", (30,), {"resample": Image.Resampling.BICUBIC, "expand": True}),
        ("center translate", (20,), {"center": (3, 4), "translate": (2, -1)}),
        ("fill", (30,), {"fillcolor": 128}),
        ("fill int bytes", (30,), {"fillcolor": 0x01020304}),
        ("fill tuple", (30,), {"fillcolor": (1, 2, 3)}),
        ("fill name", (30,), {"fillcolor": "red"}),
        ("expand 90", (90,), {"expand": True}),
        ("lanczos", (30,), {"resample": Image.Resampling.LANCZOS}),
    ]


@_pil("PIL.Image.Image.filter")
def _filter() -> Params:
    filters: list[Any] = [
        ImageFilter.BLUR,
        ImageFilter.SHARPEN,
        ImageFilter.EDGE_ENHANCE_MORE,
        ImageFilter.Kernel((3, 3), [1, 2, 3, 4, 5, 6, 7, 8, 9], scale=7, offset=3),
        ImageFilter.GaussianBlur(2),
        ImageFilter.BoxBlur(1.5),
        ImageFilter.UnsharpMask(2, 150, 3),
        ImageFilter.MedianFilter(3),
        ImageFilter.MaxFilter(5),
        ImageFilter.ModeFilter(3),
        ImageFilter.Kernel((5, 5), list(range(25)), scale=100),
        ImageFilter.Kernel((3, 3), [1, -1, 0, 0, 0, 0, 0, 0, 5], scale=0),
        ImageFilter.BoxBlur((1, 3)),
        ImageFilter.GaussianBlur(0),
        ImageFilter.RankFilter(5, 24),
        ImageFilter.MinFilter(3),
        ImageFilter.GaussianBlur(np.float64(0.2)),  # Pillow raises on a NumPy radius
        ImageFilter.BoxBlur(np.float32(1.0)),
    ]
    return [
        (type(f).__name__ if not isinstance(f, type) else f.__name__, (f,), {}) for f in filters
    ]


def _ops(*items: tuple[str, tuple[Any, ...], dict[str, Any]]) -> Callable[[], Params]:
    return lambda: list(items)


for _name, _items in {
    "PIL.ImageOps.autocontrast": (
        ("default", (), {}),
        ("cutoff", (), {"cutoff": 2}),
        ("preserve", (), {"preserve_tone": True}),
    ),
    "PIL.ImageOps.equalize": (("default", (), {}),),
    "PIL.ImageOps.invert": (("default", (), {}),),
    "PIL.ImageOps.grayscale": (("default", (), {}),),
    "PIL.ImageOps.flip": (("default", (), {}),),
    "PIL.ImageOps.mirror": (("default", (), {}),),
    "PIL.ImageOps.posterize": tuple((f"bits {b}", (b,), {}) for b in (1, 4, 8, 0)),
    "PIL.ImageOps.solarize": (("128", (128,), {}), ("0", (0,), {}), ("300", (300,), {})),
    "PIL.ImageOps.expand": (
        ("int", (2,), {}),
        ("tuple", ((1, 2, 3, 4),), {"fill": 7}),
        ("pair", ((1, 2),), {}),
        ("rgb fill", (1,), {"fill": (1, 2, 3)}),
        ("int bytes fill", (1,), {"fill": 0x01020304}),
        ("negative", (-1,), {}),
    ),
    "PIL.ImageOps.contain": (
        ("down", ((8, 8),), {}),
        ("up", ((40, 20),), {}),
        ("zero", ((0, 5),), {}),
    ),
    "PIL.ImageOps.pad": (
        ("square", ((20, 20),), {}),
        ("color", ((10, 20),), {"color": 50}),
        ("tuple color", ((10, 20),), {"color": (300, 2, 3)}),
        ("centering", ((20, 10),), {"centering": (0, 1)}),
    ),
    "PIL.ImageOps.fit": (
        ("square", ((8, 8),), {}),
        ("bleed", ((10, 6),), {"bleed": 0.1}),
        ("centering", ((6, 10),), {"centering": (0.2, 0.9)}),
        ("zero", ((0, 4),), {}),
    ),
}.items():
    _PIL[_name] = _ops(*_items)


def _case(
    name: str, index: int, mode: str, size: tuple[int, int], seed: int = 0
) -> Callable[[], Args]:
    def build() -> Args:
        _label, args, kwargs = _PIL[name]()[index]
        return (image(mode, size, seed), *args), dict(kwargs)

    return build


def cases(name: str) -> Labeled:
    """Every parameter set on an RGB and an L image, then every mode and size with the first."""
    params = _PIL[name]()
    out: Labeled = []
    for index, (label, _a, _k) in enumerate(params):
        for mode in ("RGB", "L", "RGBA"):
            out.append((f"{label} {mode}", _case(name, index, mode, (16, 12))))
    for mode in MODES:
        out.append((f"{params[0][0]} mode {mode}", _case(name, 0, mode, (16, 12))))
    for size in SIZES:
        out.append((f"{params[0][0]} size {size}", _case(name, 0, "RGB", size)))
    return out


def explore(name: str) -> st.SearchStrategy[tuple[str, Callable[[], Args]]]:
    """Random parameter sets, modes, sizes and pixels."""
    n = len(_PIL[name]())
    return st.builds(
        lambda i, mode, w, h, seed: (
            f"{name} #{i} {mode} {(w, h)}",
            _case(name, i, mode, (w, h), seed),
        ),
        st.integers(0, n - 1),
        st.sampled_from(("L", "LA", "RGB", "RGBA")),
        st.integers(1, 24),
        st.integers(1, 24),
        st.integers(0, 2**16),
    )


NAMES = frozenset(_PIL)

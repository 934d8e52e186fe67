"""PIL.ImageOps and Image.filter backends against Pillow (bit-exact)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import PROPS, assert_matches, device_fixture  # noqa: F401
from PIL import Image, ImageFilter, ImageOps
from test_pil_geometry import images

from codedag.errors import UnsupportedOperation
from codedag.migrate.ops.pil import BACKENDS, from_pil

KERNELS = [
    ImageFilter.BLUR,
    ImageFilter.CONTOUR,
    ImageFilter.DETAIL,
    ImageFilter.EDGE_ENHANCE,
    ImageFilter.EDGE_ENHANCE_MORE,
    ImageFilter.EMBOSS,
    ImageFilter.FIND_EDGES,
    ImageFilter.SHARPEN,
    ImageFilter.SMOOTH,
    ImageFilter.SMOOTH_MORE,
]


def _check(got, expected, name):
    assert got.mode == expected[0].mode
    assert_matches(got.data, np.stack([np.asarray(e) for e in expected]), name)


@PROPS
@given(
    ims=images().filter(lambda ims: ims[0].mode in ("L", "RGB")),
    op=st.sampled_from(
        ["autocontrast", "equalize", "invert", "flip", "mirror", "grayscale", "posterize"]
    ),
    squeeze=st.booleans(),
)
def test_imageops_tables(device, ims, op, squeeze):
    if squeeze:  # a narrow value range makes autocontrast and equalize do real work
        ims = [Image.fromarray((np.asarray(im) // 4 + 90).astype(np.uint8)) for im in ims]
    args = (3,) if op == "posterize" else ()
    got = BACKENDS[f"PIL.ImageOps.{op}"](from_pil(ims, device), *args)
    _check(got, [getattr(ImageOps, op)(im, *args) for im in ims], f"PIL.ImageOps.{op}")


@PROPS
@given(ims=images(), threshold=st.integers(0, 256), border=st.integers(0, 5))
def test_solarize_and_expand(device, ims, threshold, border):
    batch = from_pil(ims, device)
    if ims[0].mode in ("L", "RGB"):
        got = BACKENDS["PIL.ImageOps.solarize"](batch, threshold)
        _check(got, [ImageOps.solarize(im, threshold) for im in ims], "PIL.ImageOps.solarize")
    got = BACKENDS["PIL.ImageOps.expand"](batch, border)
    _check(got, [ImageOps.expand(im, border) for im in ims], "PIL.ImageOps.expand")


@PROPS
@given(
    ims=images(),
    kind=st.sampled_from(["box", "gauss", "unsharp"]),
    radius=st.one_of(
        st.floats(0, 12, allow_nan=False),
        st.tuples(st.floats(0, 6, allow_nan=False), st.floats(0, 6, allow_nan=False)),
    ),
)
def test_box_and_gaussian_blur(device, ims, kind, radius):
    flt = ImageFilter.BoxBlur(radius) if kind == "box" else ImageFilter.GaussianBlur(radius)
    if kind == "unsharp":
        r = radius if isinstance(radius, float) else radius[0]
        flt = ImageFilter.UnsharpMask(r, percent=int(r * 40), threshold=int(r) % 4)
    got = BACKENDS["PIL.Image.Image.filter"](from_pil(ims, device), flt)
    _check(got, [im.filter(flt) for im in ims], "PIL.Image.Image.filter")


@PROPS
@given(
    ims=images(max_side=24),
    flt=st.one_of(
        st.sampled_from(KERNELS),
        st.sampled_from([3, 5]).map(ImageFilter.MedianFilter),
        st.sampled_from([3, 5]).map(ImageFilter.MinFilter),
        st.sampled_from([3, 5]).map(ImageFilter.MaxFilter),
    ),
)
def test_kernel_and_rank_filters(device, ims, flt):
    got = BACKENDS["PIL.Image.Image.filter"](from_pil(ims, device), flt)
    _check(got, [im.filter(flt) for im in ims], "PIL.Image.Image.filter")


def test_custom_kernel_and_refusals(device):
    im = Image.fromarray(np.random.default_rng(0).integers(0, 256, (9, 11, 3), dtype=np.uint8))
    kernel = ImageFilter.Kernel((3, 3), [1, -2, 1, 0, 3, 0, 1, 2, -1], scale=3, offset=10)
    got = BACKENDS["PIL.Image.Image.filter"](from_pil([im], device), kernel)
    _check(got, [im.filter(kernel)], "PIL.Image.Image.filter")
    with pytest.raises(UnsupportedOperation):
        BACKENDS["PIL.Image.Image.filter"](from_pil([im], device), ImageFilter.ModeFilter(3))
    rgba = from_pil([im.convert("RGBA")], device)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["PIL.ImageOps.invert"](rgba)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["PIL.ImageOps.autocontrast"](from_pil([im], device), cutoff=2)


@PROPS
@given(
    ims=images(),
    size=st.tuples(st.integers(1, 48), st.integers(1, 48)),
    method=st.sampled_from([0, 1, 2, 3]),
    centering=st.tuples(st.floats(-0.5, 1.5), st.floats(-0.5, 1.5)),
    bleed=st.sampled_from([0.0, 0.1, 0.3]),
)
def test_contain_pad_fit(device, ims, size, method, centering, bleed):
    batch = from_pil(ims, device)
    w, h = ims[0].size
    ratio_ok = min(round(h / w * size[0]), round(w / h * size[1])) > 0
    if ratio_ok:
        got = BACKENDS["PIL.ImageOps.contain"](batch, size, method)
        _check(got, [ImageOps.contain(im, size, method) for im in ims], "PIL.ImageOps.contain")
        got = BACKENDS["PIL.ImageOps.pad"](batch, size, method, None, centering)
        expected = [ImageOps.pad(im, size, method, None, centering) for im in ims]
        _check(got, expected, "PIL.ImageOps.pad")
    got = BACKENDS["PIL.ImageOps.fit"](batch, size, method, bleed, centering)
    _check(
        got, [ImageOps.fit(im, size, method, bleed, centering) for im in ims], "PIL.ImageOps.fit"
    )

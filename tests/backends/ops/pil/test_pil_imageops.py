"""PIL.ImageOps backends against Pillow (bit-exact): the table ops, solarize, expand, contain, pad,
fit."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import (  # noqa: F401
    PROPS,
    assert_pil_matches,
    device_fixture,
    pil_images,
    pil_kernels,
)
from PIL import Image, ImageOps

from codedag.backends.ops.pil import BACKENDS, from_pil


@PROPS
@given(
    ims=pil_images().filter(lambda ims: ims[0].mode in ("L", "RGB")),
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
    assert_pil_matches(got, [getattr(ImageOps, op)(im, *args) for im in ims], f"PIL.ImageOps.{op}")


@PROPS
@given(ims=pil_images(), threshold=st.integers(0, 256), border=st.integers(0, 5))
def test_solarize_and_expand(device, ims, threshold, border):
    batch = from_pil(ims, device)
    if ims[0].mode in ("L", "RGB"):
        got = BACKENDS["PIL.ImageOps.solarize"](batch, threshold)
        assert_pil_matches(
            got, [ImageOps.solarize(im, threshold) for im in ims], "PIL.ImageOps.solarize"
        )
    got = BACKENDS["PIL.ImageOps.expand"](batch, border)
    assert_pil_matches(got, [ImageOps.expand(im, border) for im in ims], "PIL.ImageOps.expand")


@PROPS
@given(
    ims=pil_images(),
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
        assert_pil_matches(
            got, [ImageOps.contain(im, size, method) for im in ims], "PIL.ImageOps.contain"
        )
        got = BACKENDS["PIL.ImageOps.pad"](batch, size, method, None, centering)
        expected = [ImageOps.pad(im, size, method, None, centering) for im in ims]
        assert_pil_matches(got, expected, "PIL.ImageOps.pad")
    got = BACKENDS["PIL.ImageOps.fit"](batch, size, method, bleed, centering)
    assert_pil_matches(
        got, [ImageOps.fit(im, size, method, bleed, centering) for im in ims], "PIL.ImageOps.fit"
    )

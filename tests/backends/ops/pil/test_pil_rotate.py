"""PIL.Image.Image.rotate against Pillow: NEAREST, BILINEAR, BICUBIC, expand, center, translate, fillcolor (bit-exact)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from migrate_support import (  # noqa: F401
    PIL_MODES,
    PROPS,
    assert_pil_matches,
    device_fixture,
    pil_images,
)

from codedag.backends.ops.pil import BACKENDS, from_pil


@PROPS
@given(
    ims=pil_images(),
    angle=st.one_of(st.sampled_from([0, 90, 180, 270, -90, 45]), st.floats(-360, 360)),
    resample=st.sampled_from([0, 2, 3]),
    expand=st.booleans(),
    center=st.one_of(st.none(), st.tuples(st.integers(0, 20), st.integers(0, 20))),
    translate=st.one_of(st.none(), st.tuples(st.integers(-5, 5), st.integers(-5, 5))),
    fill=st.booleans(),
)
def test_rotate_is_bit_exact(device, ims, angle, resample, expand, center, translate, fill):
    bands = len(ims[0].getbands())
    fillcolor = None
    if fill and bands != 2:  # Pillow refuses tuple fills for LA
        fillcolor = 77 if bands == 1 else tuple(range(30, 30 + 20 * bands, 20))
    kw = dict(expand=expand, center=center, translate=translate, fillcolor=fillcolor)
    got = BACKENDS["PIL.Image.Image.rotate"](from_pil(ims, device), angle, resample, **kw)
    assert_pil_matches(
        got, [im.rotate(angle, resample, **kw) for im in ims], "PIL.Image.Image.rotate"
    )

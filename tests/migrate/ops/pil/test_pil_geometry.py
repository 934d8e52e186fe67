"""PIL.Image backends against Pillow: resize, rotate, transpose, crop, convert (bit-exact)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import PROPS, assert_matches, device_fixture  # noqa: F401
from PIL import Image

from codedag.errors import UnsupportedOperation
from codedag.migrate.ops.pil import BACKENDS, PILBatch, from_pil, to_pil

MODES = {"L": (), "LA": (2,), "RGB": (3,), "RGBA": (4,)}


@st.composite
def images(draw, max_side: int = 40):
    mode = draw(st.sampled_from(sorted(MODES)))
    w, h = draw(st.integers(1, max_side)), draw(st.integers(1, max_side))
    n = draw(st.integers(1, 3))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    arrays = rng.integers(0, 256, (n, h, w, *MODES[mode]), dtype=np.uint8)
    if draw(st.booleans()):  # smooth content as well as noise
        yy, xx = np.mgrid[0:h, 0:w]
        ramp = ((xx * 7 + yy * 3) % 256).astype(np.uint8)
        arrays = np.broadcast_to(ramp.reshape(1, h, w, *([1] * len(MODES[mode]))), arrays.shape)
    return [Image.fromarray(np.ascontiguousarray(a), mode=mode) for a in arrays]


def _check(got: PILBatch, expected: list[Image.Image], name: str) -> None:
    assert got.mode == expected[0].mode
    assert_matches(got.data, np.stack([np.asarray(e) for e in expected]), name)


@PROPS
@given(
    ims=images(),
    size=st.tuples(st.integers(1, 64), st.integers(1, 64)),
    resample=st.sampled_from([None, 0, 1, 2, 3, 4, 5]),
    use_box=st.booleans(),
)
def test_resize_is_bit_exact(device, ims, size, resample, use_box):
    w, h = ims[0].size
    box = (0.5, 0.25, w - 0.25, h) if use_box and w > 1 and h > 1 else None
    got = BACKENDS["PIL.Image.Image.resize"](from_pil(ims, device), size, resample, box)
    _check(got, [im.resize(size, resample, box) for im in ims], "PIL.Image.Image.resize")


@PROPS
@given(
    ims=images(),
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
    _check(got, [im.rotate(angle, resample, **kw) for im in ims], "PIL.Image.Image.rotate")


@PROPS
@given(ims=images(), method=st.integers(0, 6), box=st.tuples(*[st.integers(-10, 50)] * 4))
def test_transpose_and_crop(device, ims, method, box):
    batch = from_pil(ims, device)
    got = BACKENDS["PIL.Image.Image.transpose"](batch, method)
    _check(got, [im.transpose(method) for im in ims], "PIL.Image.Image.transpose")
    x0, y0, x1, y1 = box
    box = (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
    got = BACKENDS["PIL.Image.Image.crop"](batch, box)
    _check(got, [im.crop(box) for im in ims], "PIL.Image.Image.crop")


@PROPS
@given(ims=images(), mode=st.sampled_from(sorted(MODES)))
def test_convert_is_bit_exact(device, ims, mode):
    got = BACKENDS["PIL.Image.Image.convert"](from_pil(ims, device), mode)
    _check(got, [im.convert(mode) for im in ims], "PIL.Image.Image.convert")


def test_luma_is_pillows_fixed_point(device):
    im = Image.fromarray(np.array([[[255, 0, 0], [0, 255, 0], [0, 0, 255], [1, 2, 3]]], np.uint8))
    got = BACKENDS["PIL.Image.Image.convert"](from_pil([im], device), "L")
    assert got.data[0].tolist() == [[76, 150, 29, 2]] == np.asarray(im.convert("L")).tolist()


def test_pilbatch_round_trip_and_validation():
    ims = [Image.new("RGB", (5, 4), (i, 2 * i, 3 * i)) for i in range(3)]
    batch = from_pil(ims)
    assert batch.data.shape == (3, 4, 5, 3) and batch.size == (5, 4)
    back = to_pil(batch)
    assert [b.mode for b in back] == ["RGB"] * 3
    assert all(np.array_equal(np.asarray(a), np.asarray(b)) for a, b in zip(ims, back))
    with pytest.raises(UnsupportedOperation):
        PILBatch(torch.zeros((1, 4, 5), dtype=torch.uint8), "RGB")
    with pytest.raises(UnsupportedOperation):
        PILBatch(torch.zeros((1, 4, 5), dtype=torch.uint8), "CMYK")
    with pytest.raises(UnsupportedOperation):
        from_pil([Image.new("L", (3, 3)), Image.new("L", (4, 3))])


def test_unsupported_parameters(device):
    batch = from_pil([Image.new("RGB", (8, 8))], device)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["PIL.Image.Image.resize"](batch, (4, 4), 3, None, 2.0)  # reducing_gap
    with pytest.raises(UnsupportedOperation):
        BACKENDS["PIL.Image.Image.rotate"](batch, 10, 1)  # LANCZOS is refused by Pillow too
    with pytest.raises(UnsupportedOperation):
        BACKENDS["PIL.Image.Image.convert"](batch, "CMYK")

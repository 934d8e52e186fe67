"""PIL.Image backends against Pillow: resize, transpose, crop, convert, PILBatch (bit-exact)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import (  # noqa: F401
    PIL_MODES,
    PROPS,
    assert_pil_matches,
    device_fixture,
    pil_images,
)
from PIL import Image

from codedag.backends.ops.pil import BACKENDS, PILBatch, from_pil, to_pil
from codedag.errors import UnsupportedOperation


@PROPS
@given(
    ims=pil_images(),
    size=st.tuples(st.integers(1, 64), st.integers(1, 64)),
    resample=st.sampled_from([None, 0, 1, 2, 3, 4, 5]),
    use_box=st.booleans(),
)
def test_resize_is_bit_exact(device, ims, size, resample, use_box):
    w, h = ims[0].size
    box = (0.5, 0.25, w - 0.25, h) if use_box and w > 1 and h > 1 else None
    got = BACKENDS["PIL.Image.Image.resize"](from_pil(ims, device), size, resample, box)
    assert_pil_matches(
        got, [im.resize(size, resample, box) for im in ims], "PIL.Image.Image.resize"
    )


@pytest.mark.parametrize("resample", [1, 2, 3, 4, 5])
@pytest.mark.parametrize(
    ("source", "size", "box"),
    [
        ((600, 40), (13, 40), None),  # 46x down: up to 277 taps of a LANCZOS row
        ((40, 300), (40, 7), (0.0, 12.5, 40.0, 290.0)),  # the vertical pass alone, with a box
        ((23, 17), (301, 160), None),  # 13x up: every output reads a few pixels
        ((97, 61), (50, 122), (3.0, 0.0, 90.0, 61.0)),  # down one way, up the other
    ],
)
def test_resize_with_many_or_few_taps_is_bit_exact(device, resample, source, size, box):
    rng = np.random.default_rng(sum(source) + resample)
    rgba = Image.fromarray(rng.integers(0, 256, (source[1], source[0], 4), dtype=np.uint8))
    ims = [rgba, rgba.convert("RGB")]
    for im in ims:  # extremes, where a sum of negative lobes would wrap first
        im.paste((255,) * len(im.getbands()), (0, 0, source[0] // 2, source[1]))
    for im in ims:
        got = BACKENDS["PIL.Image.Image.resize"](from_pil([im], device), size, resample, box)
        assert_pil_matches(got, [im.resize(size, resample, box)], "PIL.Image.Image.resize")


@PROPS
@given(ims=pil_images(), method=st.integers(0, 6), box=st.tuples(*[st.integers(-10, 50)] * 4))
def test_transpose_and_crop(device, ims, method, box):
    batch = from_pil(ims, device)
    got = BACKENDS["PIL.Image.Image.transpose"](batch, method)
    assert_pil_matches(got, [im.transpose(method) for im in ims], "PIL.Image.Image.transpose")
    x0, y0, x1, y1 = box
    box = (min(x0, x1), min(y0, y1), max(x0, x1), max(y0, y1))
    got = BACKENDS["PIL.Image.Image.crop"](batch, box)
    assert_pil_matches(got, [im.crop(box) for im in ims], "PIL.Image.Image.crop")


@PROPS
@given(ims=pil_images(), mode=st.sampled_from(sorted(PIL_MODES)))
def test_convert_is_bit_exact(device, ims, mode):
    got = BACKENDS["PIL.Image.Image.convert"](from_pil(ims, device), mode)
    assert_pil_matches(got, [im.convert(mode) for im in ims], "PIL.Image.Image.convert")


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

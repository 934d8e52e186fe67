"""cv2.cvtColor backend against cv2, per image, for every supported conversion code."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import DEVICES, SETTINGS, batches, check_batch, refusal

from codedag.backends.ops import cv2 as ops
from codedag.backends.ops.cv2.color import _U8_UNSUPPORTED, SUPPORTED_CODES
from codedag.backends.probe import migrated_call

FOUR_CHANNEL_IN = {cv2.COLOR_BGRA2BGR, cv2.COLOR_RGBA2BGR, cv2.COLOR_BGRA2RGBA}
FOUR_CHANNEL_IN |= {cv2.COLOR_BGRA2GRAY, cv2.COLOR_RGBA2GRAY}
GRAY_IN = {cv2.COLOR_GRAY2BGR, cv2.COLOR_GRAY2BGRA}
HUE_IN = {cv2.COLOR_HSV2BGR, cv2.COLOR_HSV2RGB, cv2.COLOR_HLS2BGR, cv2.COLOR_HLS2RGB}
HUE_IN |= {cv2.COLOR_HSV2BGR_FULL, cv2.COLOR_HSV2RGB_FULL}
HUE_IN |= {cv2.COLOR_HLS2BGR_FULL, cv2.COLOR_HLS2RGB_FULL}
LAB_IN = {cv2.COLOR_Lab2BGR, cv2.COLOR_Lab2RGB}


def _input_channels(code: int) -> int:
    if code in GRAY_IN:
        return 1
    return 4 if code in FOUR_CHANNEL_IN else 3


def _float_input(batch: np.ndarray, code: int) -> np.ndarray:
    """Float images in each conversion's natural range (0..1; hue in degrees; Lab's ranges)."""
    out = batch.astype(np.float32)
    if code in HUE_IN:
        out[..., 0] *= 360.0
    if code in LAB_IN:
        out = out * np.float32([100, 254, 254]) - np.float32([0, 127, 127])
    return out


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("code", sorted(SUPPORTED_CODES))
@SETTINGS
@given(data=st.data())
def test_cvt_color(device: str, code: int, data: st.DataObject) -> None:
    cn = _input_channels(code)
    dtypes = (np.float32,) if code in _U8_UNSUPPORTED else (np.uint8, np.float32)
    batch = data.draw(batches(dtypes=dtypes, channels=(cn,), min_side=8, max_side=16, scale=1.0))
    if batch.dtype == np.float32:
        batch = _float_input(batch, code)
    check_batch(
        "cv2.cvtColor",
        batch,
        lambda im: cv2.cvtColor(im, code),
        lambda t: ops.cvtColor(t, code),
        device,
    )


def test_hsv_uint8_hue_spans_0_to_180_like_cv2() -> None:
    """Full hue circle: every hue value cv2 produces for uint8 HSV is reproduced exactly."""
    hue = np.arange(180, dtype=np.uint8)
    hsv = np.stack([hue, np.full(180, 255, np.uint8), np.full(180, 255, np.uint8)], -1)[None]
    bgr = cv2.cvtColor(hsv, cv2.COLOR_HSV2BGR)
    ours = ops.cvtColor(torch.from_numpy(bgr)[None], cv2.COLOR_BGR2HSV)[0].numpy()
    assert np.array_equal(ours, cv2.cvtColor(bgr, cv2.COLOR_BGR2HSV))
    assert ours[..., 0].max() <= 179


def test_cvt_color_declares_what_it_does_not_reproduce() -> None:
    img = np.zeros((4, 4, 3), dtype=np.float32)
    assert refusal("cv2.cvtColor", img, cv2.COLOR_BGR2Lab)  # cv2 5 interpolates tables there
    assert refusal("cv2.cvtColor", img, cv2.COLOR_YUV2BGR_NV12)
    assert refusal("cv2.cvtColor", img.astype(np.float64), cv2.COLOR_BGR2HSV)
    assert refusal("cv2.cvtColor", img.astype(np.uint8), cv2.COLOR_BGR2HLS_FULL)
    assert refusal("cv2.cvtColor", img[..., :1], cv2.COLOR_BGR2GRAY)


# -- differences found by running real augmentation code with every call migrated ---------------


@pytest.mark.parametrize("width", [64, 45, 7, 300])
@pytest.mark.parametrize("code", [cv2.COLOR_HSV2RGB, cv2.COLOR_HSV2BGR, cv2.COLOR_HLS2BGR])
def test_uint8_hsv_and_hls_to_rgb_are_bit_exact(code: int, width: int) -> None:
    """cv2 truncates in its SIMD blocks and rounds in the scalar tail of each row (HSV), goes
    through float blocks of 256 pixels (HLS): ~30% of values were off by one."""
    img = np.random.default_rng(width).integers(0, 256, (9, width, 3), dtype=np.uint8)
    np.testing.assert_array_equal(migrated_call("cv2.cvtColor")(img, code), cv2.cvtColor(img, code))


@pytest.mark.parametrize("code", [cv2.COLOR_HLS2RGB, cv2.COLOR_HSV2BGR])
def test_float_hue_out_of_range_wraps_like_cv2(code: int) -> None:
    rng = np.random.default_rng(1)
    for width in (64, 45, 7):
        img = np.concatenate(
            [rng.uniform(-400, 800, (6, width, 1)), rng.random((6, width, 2))], axis=-1
        ).astype(np.float32)
        got = migrated_call("cv2.cvtColor")(img, code)
        np.testing.assert_allclose(got, cv2.cvtColor(img, code), rtol=0, atol=1e-6)


def test_dst_cn_adds_the_alpha_channel() -> None:
    img = np.random.default_rng(2).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    for code in (cv2.COLOR_BGR2RGB, cv2.COLOR_HSV2BGR, cv2.COLOR_GRAY2BGR):
        src = img[..., 0].copy() if code == cv2.COLOR_GRAY2BGR else img
        want = cv2.cvtColor(src, code, dstCn=4)
        got = migrated_call("cv2.cvtColor")(src, code, dstCn=4)
        assert got.shape == want.shape == (8, 8, 4)
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["float64", "int16", "int8", "int32", "float16", "bool"])
def test_dtypes_cv2_rejects_are_declared_and_raise_cv2s_error(dtype: str) -> None:
    img = np.ones((8, 8, 3), dtype)
    assert refusal("cv2.cvtColor", img, cv2.COLOR_BGR2HSV)
    with pytest.raises(cv2.error):
        cv2.cvtColor(img, cv2.COLOR_BGR2HSV)  # what the original raises in a migrated run


def test_empty_images_are_declared() -> None:
    assert refusal("cv2.cvtColor", np.ones((0, 8, 3), np.uint8), cv2.COLOR_BGR2GRAY)
    with pytest.raises(cv2.error):
        cv2.cvtColor(np.ones((0, 8, 3), np.uint8), cv2.COLOR_BGR2GRAY)


def test_uint8_gray_is_bit_exact() -> None:
    img = np.random.default_rng(3).integers(0, 256, (64, 70, 4), dtype=np.uint8)
    for code, src in ((cv2.COLOR_BGR2GRAY, img[..., :3]), (cv2.COLOR_RGBA2GRAY, img)):
        src = np.ascontiguousarray(src)
        np.testing.assert_array_equal(
            migrated_call("cv2.cvtColor")(src, code), cv2.cvtColor(src, code)
        )

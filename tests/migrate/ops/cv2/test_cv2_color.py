"""cv2.cvtColor backend against cv2, per image, for every supported conversion code."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import DEVICES, SETTINGS, batches, check_batch, refusal

from codedag.migrate.ops import cv2 as ops
from codedag.migrate.ops.cv2.color import _U8_UNSUPPORTED, SUPPORTED_CODES

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

"""cv2 geometry backends (flips, rotations, transposes, borders) against cv2, per image."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import CV2_BORDERS, DEVICES, SETTINGS, batches, check_batch, refusal

from codedag.backends.ops import cv2 as ops
from codedag.backends.probe import migrated_call


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(batch=batches(dtypes=(np.uint8, np.float32, np.float64, np.int16)), code=st.integers(-1, 1))
def test_flip(device: str, batch: np.ndarray, code: int) -> None:
    check_batch(
        "cv2.flip", batch, lambda im: cv2.flip(im, code), lambda t: ops.flip(t, code), device
    )


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(batch=batches(), code=st.sampled_from([0, 1, 2]))
def test_rotate_and_transpose(device: str, batch: np.ndarray, code: int) -> None:
    check_batch(
        "cv2.rotate", batch, lambda im: cv2.rotate(im, code), lambda t: ops.rotate(t, code), device
    )
    check_batch("cv2.transpose", batch, cv2.transpose, ops.transpose, device)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(min_side=3),
    pads=st.tuples(*[st.integers(0, 6)] * 4),
    border=st.sampled_from(CV2_BORDERS),
    value=st.sampled_from([None, 7, (1, 2, 3, 4), 300.5]),
)
def test_copy_make_border(
    device: str, batch: np.ndarray, pads: tuple[int, int, int, int], border: int, value: object
) -> None:
    top, bottom, left, right = pads
    check_batch(
        "cv2.copyMakeBorder",
        batch,
        lambda im: cv2.copyMakeBorder(im, top, bottom, left, right, border, value=value),
        lambda t: ops.copyMakeBorder(t, top, bottom, left, right, border, value=value),
        device,
    )


def test_geometry_declares_what_it_does_not_reproduce() -> None:
    img = np.zeros((8, 8, 3), dtype=np.uint8)
    m = np.eye(2, 3)
    assert refusal("cv2.warpAffine", img, m, (8, 8), borderMode=cv2.BORDER_TRANSPARENT)
    assert refusal("cv2.warpAffine", img, np.eye(3), (8, 8))
    assert refusal("cv2.resize", img, (4, 4), interpolation=cv2.INTER_MAX)
    assert refusal("cv2.resize", img, None)
    assert refusal("cv2.resize", torch.zeros((8, 8, 3), dtype=torch.uint8), (4, 4))
    assert refusal("cv2.rotate", img, 3)
    assert refusal("cv2.flip", np.zeros((2, 8, 8, 3), np.uint8), 1)  # 4-d: not an image
    assert refusal("cv2.resize", img, (4, 4)) is None


def test_copy_make_border_with_zero_borders_returns_a_copy() -> None:
    img = np.arange(48, dtype=np.uint8).reshape(4, 4, 3)
    for border in (cv2.BORDER_CONSTANT, cv2.BORDER_REFLECT):
        got = migrated_call("cv2.copyMakeBorder")(img, 0, 0, 0, 0, border)
        np.testing.assert_array_equal(got, img)
        assert not np.shares_memory(got, img)


@pytest.mark.parametrize("dtype", ["uint16", "uint32", "int8", "float64"])
@pytest.mark.parametrize("order", ["C", "F"])
def test_flip_and_rotate_take_every_dtype_cv2_takes(dtype: str, order: str) -> None:
    """torch's CPU flip has no uint16/uint32 kernel: those flip as the signed ints of their width."""
    img = np.arange(12 * 16 * 3, dtype=dtype).reshape(12, 16, 3)
    img = np.asfortranarray(img) if order == "F" else img
    for code in (0, 1, -1):
        got = migrated_call("cv2.flip")(img, code)
        want = cv2.flip(img, code)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)
    for code in (cv2.ROTATE_90_CLOCKWISE, cv2.ROTATE_180, cv2.ROTATE_90_COUNTERCLOCKWISE):
        got = migrated_call("cv2.rotate")(img, code)
        want = cv2.rotate(img, code)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_copy_make_border_of_an_empty_image_is_left_to_cv2() -> None:
    """cv2 reflecting an empty image never returns: the declaration refuses empty images, so the
    conformance suite does not call cv2 on them either."""
    img = np.zeros((0, 16, 3), dtype=np.uint8)
    assert refusal("cv2.copyMakeBorder", img, 1, 1, 1, 1, cv2.BORDER_REFLECT_101)

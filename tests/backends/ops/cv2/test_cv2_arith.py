"""cv2 per-pixel arithmetic, normalize, LUT, threshold and equalizeHist backends against cv2."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import DEVICES, SETTINGS, batches, check_batch, refusal

from codedag.backends.ops import cv2 as ops

ALL_DTYPES = (np.uint8, np.float32, np.float64)


SCALARS = st.sampled_from([2.5, 3.5, -7.25, 300, 0.5, (1, 2, 3, 4), (10.5, -3)])


def _pair(batch: np.ndarray, seed: int) -> np.ndarray:
    """A second batch like ``batch`` (same shape and dtype), for binary operations."""
    rng = np.random.default_rng(seed)
    if batch.dtype == np.uint8:
        return rng.integers(0, 256, batch.shape).astype(np.uint8)
    return (rng.random(batch.shape) * 300 - 20).astype(batch.dtype)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["add", "subtract", "absdiff"])
@SETTINGS
@given(batch=batches(dtypes=ALL_DTYPES), seed=st.integers(0, 2**32 - 1), scalar=SCALARS)
def test_saturating_add_subtract_absdiff(
    device: str, name: str, batch: np.ndarray, seed: int, scalar: object
) -> None:
    other = _pair(batch, seed)
    ref_fn, ours = getattr(cv2, name), getattr(ops, name)
    dev_other = torch.from_numpy(other).to(device)
    pairs = list(zip(other, dev_other))
    index = iter(range(len(batch)))
    check_batch(
        f"cv2.{name}",
        batch,
        lambda im: ref_fn(im, pairs[next(index)][0]),
        lambda t: ours(t, dev_other),
        device,
    )
    # A Scalar operand (number broadcast, tuple per channel); cv2 reads a tuple as an array when
    # the image has at most 4 pixels, so those are left out.
    if name != "absdiff" and batch.shape[1] * batch.shape[2] > 4:
        check_batch(
            f"cv2.{name}",
            batch,
            lambda im: ref_fn(im, scalar),
            lambda t: ours(t, scalar),
            device,
        )


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(dtypes=ALL_DTYPES),
    seed=st.integers(0, 2**32 - 1),
    scale=st.sampled_from([1.0, 0.37, 1 / 255, 2.0]),
    factor=st.sampled_from([1.7, 0.5, 3]),
)
def test_multiply(device: str, batch: np.ndarray, seed: int, scale: float, factor: float) -> None:
    other = _pair(batch, seed)
    index = iter(range(len(batch)))
    check_batch(
        "cv2.multiply",
        batch,
        lambda im: cv2.multiply(im, other[next(index)], scale=scale),
        lambda t: ops.multiply(t, torch.from_numpy(other).to(device), scale=scale),
        device,
    )
    if batch.shape[1] * batch.shape[2] <= 4:
        return  # cv2 reads a number as an array next to images of at most 4 pixels
    check_batch(
        "cv2.multiply",
        batch,
        lambda im: cv2.multiply(im, factor, scale=scale),
        lambda t: ops.multiply(t, factor, scale=scale),
        device,
    )


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(dtypes=ALL_DTYPES, min_side=8),
    seed=st.integers(0, 2**32 - 1),
    weights=st.tuples(st.floats(-2, 2), st.floats(-2, 2), st.floats(-50, 50)),
)
def test_add_weighted_and_convert_scale_abs(
    device: str, batch: np.ndarray, seed: int, weights: tuple[float, float, float]
) -> None:
    alpha, beta, gamma = weights
    other = _pair(batch, seed)
    index = iter(range(len(batch)))
    check_batch(
        "cv2.addWeighted",
        batch,
        lambda im: cv2.addWeighted(im, alpha, other[next(index)], beta, gamma),
        lambda t: ops.addWeighted(t, alpha, torch.from_numpy(other).to(device), beta, gamma),
        device,
    )
    check_batch(
        "cv2.convertScaleAbs",
        batch,
        lambda im: cv2.convertScaleAbs(im, alpha=alpha, beta=gamma),
        lambda t: ops.convertScaleAbs(t, alpha=alpha, beta=gamma),
        device,
    )


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(dtypes=ALL_DTYPES, min_side=4),
    norm_type=st.sampled_from([cv2.NORM_INF, cv2.NORM_L1, cv2.NORM_L2, cv2.NORM_MINMAX]),
    bounds=st.sampled_from([(0.0, 1.0), (1.0, 0.0), (10.0, 200.0), (0.7, 0.0), (-1.0, 1.0)]),
    dtype=st.sampled_from([-1, cv2.CV_8U, cv2.CV_32F, cv2.CV_64F]),
)
def test_normalize_per_image(
    device: str, batch: np.ndarray, norm_type: int, bounds: tuple[float, float], dtype: int
) -> None:
    alpha, beta = bounds
    check_batch(
        "cv2.normalize",
        batch,
        lambda im: cv2.normalize(im, None, alpha, beta, norm_type, dtype),
        lambda t: ops.normalize(t, None, alpha, beta, norm_type, dtype),
        device,
    )


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(dtypes=(np.uint8,)),
    seed=st.integers(0, 2**32 - 1),
    table_dtype=st.sampled_from([np.uint8, np.float32]),
    per_channel=st.booleans(),
)
def test_lut(
    device: str, batch: np.ndarray, seed: int, table_dtype: type, per_channel: bool
) -> None:
    rng = np.random.default_rng(seed)
    cn = 1 if batch.ndim == 3 else batch.shape[3]
    shape = (256, 1, cn) if per_channel and cn > 1 else (256,)
    table = (rng.random(shape) * 255).astype(table_dtype)
    check_batch(
        "cv2.LUT",
        batch,
        lambda im: cv2.LUT(im, table),
        lambda t: ops.LUT(t, torch.from_numpy(table).to(device)),
        device,
    )


def test_arithmetic_declares_what_it_does_not_reproduce() -> None:
    a = np.zeros((4, 4, 3), dtype=np.uint8)
    assert refusal("cv2.add", a, a.astype(np.float32))  # mixed dtypes need dtype=, as in cv2
    assert refusal("cv2.add", a, a, mask=a[..., 0])
    assert refusal("cv2.threshold", a, 0, 255, cv2.THRESH_OTSU)  # Otsu needs one channel
    assert refusal("cv2.normalize", a, None, 0, 1, cv2.NORM_HAMMING)
    assert refusal("cv2.equalizeHist", a)
    assert refusal("cv2.add", a, a) is None

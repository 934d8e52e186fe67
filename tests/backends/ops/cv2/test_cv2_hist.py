"""cv2.threshold (Otsu and triangle included) and cv2.equalizeHist against cv2, per image."""

from __future__ import annotations

from fractions import Fraction

import cv2
import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import DEVICES, SETTINGS, batches, check_batch

from codedag.backends.ops import cv2 as ops

THRESHOLD_DTYPES = (np.uint8, np.float32, np.float64)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=batches(dtypes=THRESHOLD_DTYPES),
    kind=st.integers(0, 4),
    thresh=st.sampled_from([100.7, 0.0, -3.0, 254.5, 300.0, 127.0]),
    maxval=st.sampled_from([255.0, 200.5, 1.0]),
)
def test_threshold(device: str, batch: np.ndarray, kind: int, thresh: float, maxval: float) -> None:
    ref_ret = cv2.threshold(batch[0], thresh, maxval, kind)[0]
    ret, _ = ops.threshold(torch.from_numpy(batch).to(device), thresh, maxval, kind)
    assert ret == ref_ret
    check_batch(
        "cv2.threshold",
        batch,
        lambda im: cv2.threshold(im, thresh, maxval, kind)[1],
        lambda t: ops.threshold(t, thresh, maxval, kind)[1],
        device,
    )


@st.composite
def _gray_batches(draw: st.DrawFn) -> np.ndarray:
    """Single-channel uint8 batches with uniform, peaked (normal) or narrow-range histograms."""
    n, h, w = draw(st.integers(1, 3)), draw(st.integers(1, 24)), draw(st.integers(1, 24))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    kind = draw(st.sampled_from(["uniform", "normal", "narrow"]))
    if kind == "uniform":
        return rng.integers(0, 256, (n, h, w)).astype(np.uint8)
    if kind == "normal":
        img = rng.normal(rng.uniform(0, 255), rng.uniform(1, 60), (n, h, w))
        return np.clip(img, 0, 255).astype(np.uint8)
    low, span = int(rng.integers(0, 200)), int(rng.integers(1, 56))
    return (low + rng.integers(0, span, (n, h, w))).astype(np.uint8)


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=_gray_batches(),
    kind=st.sampled_from([0, 1, 2, 3, 4]),
    auto=st.sampled_from([cv2.THRESH_OTSU, cv2.THRESH_TRIANGLE]),
)
def test_threshold_otsu_and_triangle_per_image(
    device: str, batch: np.ndarray, kind: int, auto: int
) -> None:
    flags = kind | auto
    rets, out = ops.threshold(torch.from_numpy(batch).to(device), 0, 255, flags)
    got = [rets] if len(batch) == 1 else rets.cpu().tolist()
    for im, t, result in zip(batch, got, out.cpu().numpy(), strict=True):
        ref_t, ref = cv2.threshold(im, 0, 255, flags)
        if t != ref_t:
            # cv2's x86 wheels compute Otsu with Intel IPP, which breaks exact ties of the
            # between-class variance its own way; anything else must match.
            assert auto == cv2.THRESH_OTSU and _otsu_variance(im, t) == _otsu_variance(im, ref_t)
            continue
        assert np.array_equal(result, ref)


def _otsu_variance(img: np.ndarray, t: float) -> Fraction:
    """Otsu's between-class variance of threshold ``t``, exactly."""
    h = np.bincount(img.ravel(), minlength=256).astype(np.int64)
    k = int(t) + 1
    n0, n1 = int(h[:k].sum()), int(h[k:].sum())
    s0, s1 = int((h[:k] * np.arange(k)).sum()), int((h[k:] * np.arange(k, 256)).sum())
    if n0 == 0 or n1 == 0:
        return Fraction(0)
    total = n0 + n1
    return Fraction(n0 * n1, total * total) * (Fraction(s0, n0) - Fraction(s1, n1)) ** 2


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(batch=batches(dtypes=(np.uint8,), channels=(1,)), levels=st.integers(1, 256))
def test_equalize_hist(device: str, batch: np.ndarray, levels: int) -> None:
    """Includes images with few grey levels (and a single level, which cv2 keeps as is)."""
    batch = (batch.astype(np.int64) % levels).astype(np.uint8)
    check_batch("cv2.equalizeHist", batch, cv2.equalizeHist, ops.equalizeHist, device)

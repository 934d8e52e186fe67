"""cv2.Canny backend against cv2: every edge pixel equal, on smooth-plus-noise images."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import DEVICES, SETTINGS, check_batch, refusal

from codedag.backends.ops import cv2 as ops


@st.composite
def edge_images(draw: st.DrawFn) -> np.ndarray:
    """Batches (1, 3 or 4 channels) with structure (upsampled blocks plus noise): long edges."""
    n = draw(st.integers(1, 3))
    h, w = draw(st.integers(3, 40)), draw(st.integers(3, 40))
    c = draw(st.sampled_from([1, 3, 4]))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    out = []
    for _ in range(n):
        blocks = rng.integers(0, 256, (h // 4 + 1, w // 4 + 1, c)).astype(np.uint8)
        img = cv2.resize(blocks, (w, h), interpolation=cv2.INTER_LINEAR).reshape(h, w, c)
        noisy = img.astype(np.int64) + rng.integers(0, 30, (h, w, c))
        out.append(np.clip(noisy, 0, 255).astype(np.uint8))
    batch = np.stack(out)
    return batch[..., 0] if c == 1 else batch


@pytest.mark.parametrize("device", DEVICES)
@SETTINGS
@given(
    batch=edge_images(),
    thresholds=st.tuples(st.floats(0, 400), st.floats(0, 400)),
    aperture=st.sampled_from([3, 5, 7]),
    l2=st.booleans(),
)
def test_canny(
    device: str, batch: np.ndarray, thresholds: tuple[float, float], aperture: int, l2: bool
) -> None:
    lo, hi = thresholds
    if aperture > 3:
        lo, hi = lo * 12, hi * 12  # larger kernels: larger gradients
    check_batch(
        "cv2.Canny",
        batch,
        lambda im: cv2.Canny(im, lo, hi, apertureSize=aperture, L2gradient=l2),
        lambda t: ops.Canny(t, lo, hi, apertureSize=aperture, L2gradient=l2),
        device,
    )


def test_canny_declares_what_it_does_not_reproduce() -> None:
    assert refusal("cv2.Canny", np.zeros((8, 8), np.float32), 10, 20)
    assert refusal("cv2.Canny", np.zeros((8, 8), np.uint8), 10, 20, apertureSize=9)
    assert refusal("cv2.Canny", np.zeros((8, 8, 2), np.uint8), 10, 20) is None

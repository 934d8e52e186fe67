"""Shared helpers of the cv2 backend tests: random image batches, the device list, comparison."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from codedag.migrate.tolerances import tolerance_for

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
SETTINGS = settings(
    max_examples=int(os.environ.get("CV2_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@st.composite
def batches(
    draw: st.DrawFn,
    dtypes: Sequence[Any] = (np.uint8, np.float32),
    channels: Sequence[int] = (1, 3, 4),
    min_side: int = 1,
    max_side: int = 24,
    max_n: int = 3,
    scale: float = 255.0,
    offset: float = 0.0,
) -> np.ndarray:
    """A batch (N,H,W) or (N,H,W,C) of random images; float images span offset..offset+scale."""
    n = draw(st.integers(1, max_n))
    h = draw(st.integers(min_side, max_side))
    w = draw(st.integers(min_side, max_side))
    dtype = draw(st.sampled_from(list(dtypes)))
    c = draw(st.sampled_from(list(channels)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    if np.dtype(dtype) == np.uint8:
        arr = rng.integers(0, 256, (n, h, w, c)).astype(np.uint8)
    else:
        arr = (rng.random((n, h, w, c)) * scale + offset).astype(dtype)
    return arr[..., 0] if c == 1 else arr


def assert_matches(name: str, out: torch.Tensor, ref: np.ndarray) -> None:
    """Assert that a backend's batch output equals the stacked cv2 outputs within the tolerance."""
    assert isinstance(out, torch.Tensor), f"{name}: backend returned {type(out).__name__}"
    got = out.detach().cpu().numpy()
    assert got.shape == ref.shape, f"{name}: shape {got.shape} != cv2's {ref.shape}"
    assert got.dtype == ref.dtype, f"{name}: dtype {got.dtype} != cv2's {ref.dtype}"
    tol = tolerance_for(name)
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    bad = diff > tol.atol + tol.rtol * np.abs(ref.astype(np.float64))
    frac = float(bad.mean()) if bad.size else 0.0
    worst = float(diff[bad].max()) if bad.any() else 0.0
    assert frac <= tol.max_mismatch_frac, (
        f"{name}: {frac:.3%} of values differ (allowed {tol.max_mismatch_frac:.3%}), max {worst}"
    )
    assert worst <= tol.mismatch_atol, f"{name}: a value differs by {worst} > {tol.mismatch_atol}"


def check_batch(
    name: str,
    batch: np.ndarray,
    reference: Callable[[np.ndarray], np.ndarray],
    backend: Callable[[torch.Tensor], torch.Tensor],
    device: str,
) -> None:
    """Run ``backend`` on the whole batch on ``device`` and compare with ``reference`` per image."""
    ref = np.stack([reference(np.ascontiguousarray(img)) for img in batch])
    out = backend(torch.from_numpy(batch).to(device))
    assert out.device.type == torch.device(device).type
    assert_matches(name, out, ref)

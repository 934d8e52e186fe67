"""Every cv2 backend through the migrator (batch of one, tensors in, NumPy back) equals cv2."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import pytest

from codedag.backends.ops.cv2 import BACKENDS
from codedag.backends.tolerances import tolerance_for
from codedag.migrate.api import PipelineMigrator


def _plan(keys: list[str]) -> dict[str, Any]:
    return {
        "schema_version": 1,
        "codedag_version": "0.1.0",
        "k": 2,
        "gpu_count": 1,
        "target_device": "cpu",
        "partition_device_map": {"0": "cpu", "1": "cpu"},
        "context_device_map": dict.fromkeys(keys, "cpu"),
        "calls": [],
        "notes": [],
    }


def _calls() -> dict[str, tuple[tuple[Any, ...], dict[str, Any]]]:
    rng = np.random.default_rng(0)
    img = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    gray = cv2.GaussianBlur(rng.integers(0, 256, (48, 64), dtype=np.uint8), (5, 5), 0)
    other = rng.integers(0, 256, (48, 64, 3), dtype=np.uint8)
    m = cv2.getRotationMatrix2D((32.0, 24.0), 17.0, 1.1)
    return {
        "GaussianBlur": ((img, (5, 5), 1.2), {}),
        "LUT": ((img, rng.integers(0, 256, 256).astype(np.uint8)), {}),
        "Sobel": ((img, cv2.CV_16S, 1, 0), {}),
        "absdiff": ((img, other), {}),
        "add": ((img, other), {}),
        "addWeighted": ((img, 0.3, other, 0.7, 2.0), {}),
        "blur": ((img, (3, 5)), {}),
        "boxFilter": ((img, -1, (3, 3)), {"normalize": False}),
        "Canny": ((gray, 30, 90), {}),
        "convertScaleAbs": ((img,), {"alpha": 1.3, "beta": -20}),
        "copyMakeBorder": ((img, 2, 3, 4, 5, cv2.BORDER_REFLECT), {}),
        "cvtColor": ((img, cv2.COLOR_BGR2HSV), {}),
        "equalizeHist": ((gray,), {}),
        "filter2D": ((img, -1, np.ones((3, 3), np.float32) / 9), {}),
        "flip": ((img, 1), {}),
        "medianBlur": ((img, 5), {}),
        "multiply": ((img, other), {"scale": 1 / 255}),
        "normalize": ((img, None, 0, 1, cv2.NORM_MINMAX, cv2.CV_32F), {}),
        "resize": ((img, (40, 30)), {"interpolation": cv2.INTER_AREA}),
        "rotate": ((img, cv2.ROTATE_90_CLOCKWISE), {}),
        "subtract": ((img, other), {}),
        "threshold": ((gray, 0, 255, cv2.THRESH_BINARY | cv2.THRESH_OTSU), {}),
        "transpose": ((img,), {}),
        "warpAffine": ((img, m, (64, 48)), {"borderMode": cv2.BORDER_REFLECT_101}),
        "warpPerspective": ((img, np.vstack([m, [1e-4, 2e-4, 1.0]]), (64, 48)), {}),
    }


def _close(name: str, got: Any, want: Any) -> None:
    assert type(got) is type(want), (name, type(got), type(want))
    if isinstance(want, tuple):
        for g, w in zip(got, want, strict=True):
            _close(name, g, w)
        return
    if not isinstance(want, np.ndarray):
        assert got == pytest.approx(want), name
        return
    assert (got.shape, got.dtype) == (want.shape, want.dtype), name
    tol = tolerance_for(name)
    diff = np.abs(got.astype(np.float64) - want.astype(np.float64))
    bad = diff > tol.allowed(want.astype(np.float64))
    assert bad.mean() <= tol.max_mismatch_frac, (name, float(diff.max()))
    assert not bad.any() or diff[bad].max() <= tol.mismatch_atol, (name, float(diff.max()))


def test_every_cv2_backend_through_the_migrator_equals_cv2() -> None:
    calls = _calls()
    assert {f"cv2.{n}" for n in calls} == set(BACKENDS)
    expected = {n: getattr(cv2, n)(*a, **k) for n, (a, k) in calls.items()}
    here = f"{__name__}.test_every_cv2_backend_through_the_migrator_equals_cv2"
    migrator = PipelineMigrator.from_plan(_plan([f"{here}#0/cv2.{n}#0" for n in calls]))
    assert migrator.apply()["patched"] == len(calls)
    try:
        got = {n: getattr(cv2, n)(*a, **k) for n, (a, k) in calls.items()}
    finally:
        migrator.restore()
    stats = migrator.get_stats()["functions"]
    for name in calls:
        _close(f"cv2.{name}", got[name], expected[name])
        assert stats[f"cv2.{name}"]["fell_back"] == 0, stats[f"cv2.{name}"]["fallback_reasons"]
        assert stats[f"cv2.{name}"]["migrated"] == 1, name

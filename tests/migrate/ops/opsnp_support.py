"""Shared test support of the NumPy, PIL and audio backends: device fixture, arrays, comparison."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings

from codedag.migrate.tolerances import tolerance_for

# Modest example counts: these suites run on a shared 2-core machine.
PROPS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
FEW = settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(name="device", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device_fixture(request: pytest.FixtureRequest) -> torch.device:
    """Every backend test runs on the CPU here and on CUDA under ``pytest -m gpu``.

    Import ``device_fixture`` into a test module to use the ``device`` fixture there.
    """
    return torch.device(request.param)


def to_dev(a: np.ndarray, device: torch.device) -> torch.Tensor:
    """A NumPy array as a tensor on ``device`` (same dtype and shape)."""
    return torch.from_numpy(np.array(a, copy=True, order="C")).to(device)


def random_array(seed: int, shape: tuple[int, ...], dtype: np.dtype | type) -> np.ndarray:
    """Values over the whole range of small integer dtypes, moderate values for the others."""
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype)
    if dt == np.bool_:
        return rng.integers(0, 2, shape).astype(bool)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        lo, hi = max(int(info.min), -1000), min(int(info.max), 1000)
        if dt.itemsize == 1:
            lo, hi = int(info.min), int(info.max)
        return rng.integers(lo, hi, shape, endpoint=True).astype(dt)
    return (rng.standard_normal(shape) * 10).astype(dt)


def assert_matches(
    actual: torch.Tensor,
    expected: np.ndarray | np.generic | float,
    name: str,
    *,
    dtype: bool = True,
) -> None:
    """Assert ``actual`` equals the library's ``expected`` within TOLERANCES[name]."""
    tol = tolerance_for(name)
    got = actual.detach().cpu().numpy()
    exp = np.asarray(expected)
    assert got.shape == exp.shape, f"{name}: shape {got.shape} != library {exp.shape}"
    if dtype:
        assert got.dtype == exp.dtype, f"{name}: dtype {got.dtype} != library {exp.dtype}"
    if exp.dtype == np.bool_ or got.dtype == np.bool_:
        bad = got != exp
        assert not bad.any(), f"{name}: {int(bad.sum())} of {bad.size} booleans differ"
        return
    g = got.astype(np.complex128 if np.iscomplexobj(got) else np.float64)
    e = exp.astype(np.complex128 if np.iscomplexobj(exp) else np.float64)
    nan_g, nan_e = np.isnan(g), np.isnan(e)
    assert (nan_g == nan_e).all(), f"{name}: NaN positions differ"
    with np.errstate(invalid="ignore"):
        same = (g == e) | nan_e
        diff = np.where(same, 0.0, np.abs(g - e))
    allowed = tol.atol + tol.rtol * np.abs(np.where(np.isfinite(e), e, 0))
    bad = diff > allowed
    if not bad.any():
        return
    frac = float(bad.mean())
    worst = float(diff[bad].max())
    assert frac <= tol.max_mismatch_frac and worst <= tol.mismatch_atol, (
        f"{name}: {int(bad.sum())} of {bad.size} elements ({frac:.2%}) outside "
        f"atol={tol.atol} rtol={tol.rtol}; worst difference {worst:g} "
        f"(allowed {tol.max_mismatch_frac:.2%} up to {tol.mismatch_atol})"
    )

"""Shared helpers of the migration tests, in one place.

* tiny exact backends and a registry of them, plan builders: for the tests of the migration
  machinery, which must not depend on which library backends exist;
* hypothesis settings, the device list and fixture, random arrays and image batches;
* :func:`assert_matches`: a result against the library's, within the tolerance table.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from codedag.errors import UnsupportedOperation
from codedag.migrate.registry import Registry, spec_from_backend
from codedag.migrate.tolerances import tolerance_for

# Modest example counts: these suites run on a shared 2-core machine. CI runs a fixed example set
# (the "ci" profile of tests/conftest.py derandomizes hypothesis).
PROPS = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
FEW = settings(
    max_examples=10, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
SETTINGS = settings(
    max_examples=int(os.environ.get("CV2_EXAMPLES", "15")),
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]

CALLS: dict[str, int] = {"flip": 0, "add": 0, "clip": 0, "boom": 0}


def flip(src: torch.Tensor, flipCode: int, dst: Any = None) -> torch.Tensor:
    """cv2.flip on a batch (N, H, W[, C])."""
    CALLS["flip"] += 1
    if dst is not None:
        raise UnsupportedOperation("dst")
    if flipCode == 0:
        return src.flip(1)
    if flipCode > 0:
        return src.flip(2)
    return src.flip(1).flip(2)


def add(src1: torch.Tensor, src2: Any, dst: Any = None, mask: Any = None, dtype: int = -1) -> Any:
    """cv2.add of two uint8 batches with saturation."""
    CALLS["add"] += 1
    if mask is not None or dtype != -1 or not isinstance(src2, torch.Tensor):
        raise UnsupportedOperation("only two arrays")
    if src1.dtype != torch.uint8 or src2.dtype != torch.uint8:
        raise UnsupportedOperation("uint8 only")
    return (src1.to(torch.int16) + src2.to(torch.int16)).clamp(0, 255).to(torch.uint8)


def clip(a: torch.Tensor, a_min: Any = None, a_max: Any = None, out: Any = None) -> torch.Tensor:
    """numpy.clip for float arrays with scalar bounds (dtype preserved)."""
    CALLS["clip"] += 1
    if not a.is_floating_point():
        raise UnsupportedOperation("floats only")
    return a.clamp(a_min, a_max)


def boom(src: torch.Tensor, flipCode: int, dst: Any = None) -> torch.Tensor:
    """A backend that always fails."""
    CALLS["boom"] += 1
    raise RuntimeError("injected failure")


def make_registry(**overrides: Any) -> Registry:
    """A registry with cv2.flip, cv2.add and numpy.clip test backends (overridable)."""
    backends = {"cv2.flip": flip, "cv2.add": add, "numpy.clip": clip, **overrides}
    registry = Registry()
    for name, backend in backends.items():
        module = name.split(".", 1)[0]
        registry.register(spec_from_backend(name, backend, module))
    return registry


def plan_for(mapping: dict[str, Any], calls: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A contract plan dict from ``{context key: device}``."""
    return {
        "schema_version": 1,
        "codedag_version": "0.1.0",
        "k": 2,
        "gpu_count": 1,
        "target_device": "cpu",
        "partition_device_map": {"0": "cpu", "1": "cpu"},
        "context_device_map": dict(mapping),
        "calls": list(calls or []),
        "notes": [],
    }


# -- devices, arrays, comparison ------------------------------------------------------------


@pytest.fixture(name="device", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def device_fixture(request: pytest.FixtureRequest) -> torch.device:
    """Every backend test runs on the CPU here and on CUDA under ``pytest -m gpu``.

    Import ``device_fixture`` into a test module to use the ``device`` fixture there.
    """
    return torch.device(request.param)


def to_dev(a: np.ndarray, device: torch.device | str) -> torch.Tensor:
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


def assert_matches(
    actual: Any,
    expected: Any,
    name: str,
    *,
    dtype: bool = True,
) -> None:
    """Assert ``actual`` (tensor or array) equals the library's ``expected`` within
    ``tolerance_for(name)``: same shape (and dtype), NaN where the library has NaN."""
    tol = tolerance_for(name)
    if isinstance(actual, torch.Tensor):
        actual = actual.detach().cpu().resolve_conj().resolve_neg().numpy()
    got = np.asarray(actual)
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
    assert isinstance(out, torch.Tensor), f"{name}: backend returned {type(out).__name__}"
    assert out.device.type == torch.device(device).type
    assert_matches(out, ref, name)

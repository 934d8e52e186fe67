"""NumPy reduction backends against NumPy: axes, keepdims, ddof and NumPy's accumulator dtypes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from migrate_support import PROPS, assert_matches, device_fixture, random_array, to_dev  # noqa: F401

from codedag.backends.ops.numpy import BACKENDS
from codedag.backends.probe import migrated_call
from codedag.errors import UnsupportedOperation

DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64]
DTYPES += [np.float16, np.float32, np.float64]
NAMES = ["sum", "prod", "mean", "var", "std", "min", "max", "all", "any"]


@st.composite
def array_and_axis(draw):
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=6))
    axis = draw(
        st.one_of(
            st.none(),
            st.integers(-len(shape), len(shape) - 1),
            st.lists(st.integers(0, len(shape) - 1), min_size=1, unique=True).map(tuple),
        )
    )
    return shape, axis


@PROPS
@given(
    name=st.sampled_from(NAMES),
    dt=st.sampled_from(DTYPES),
    shape_axis=array_and_axis(),
    keepdims=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_reductions_match_numpy(device, name, dt, shape_axis, keepdims, seed):
    shape, axis = shape_axis
    a = random_array(seed, shape, dt)
    if name == "prod" and a.dtype.kind == "f":
        a = (a / 10).astype(dt)  # keep float16 products finite
    if name in ("sum", "prod") and dt == np.float16:
        with pytest.raises(UnsupportedOperation, match="float16"):  # left to NumPy
            BACKENDS[f"numpy.{name}"](to_dev(a, device), axis=axis, keepdims=keepdims)
        return
    got = BACKENDS[f"numpy.{name}"](to_dev(a, device), axis=axis, keepdims=keepdims)
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(a, axis=axis, keepdims=keepdims)
    assert_matches(got, expected, f"numpy.{name}")


@PROPS
@given(
    name=st.sampled_from(["var", "std"]),
    dt=st.sampled_from([np.uint8, np.int32, np.float32, np.float64]),
    ddof=st.integers(0, 2),
    seed=st.integers(0, 2**32 - 1),
)
def test_var_std_ddof(device, name, dt, ddof, seed):
    a = random_array(seed, (5, 7), dt)
    got = BACKENDS[f"numpy.{name}"](to_dev(a, device), axis=1, ddof=ddof)
    assert_matches(got, getattr(np, name)(a, axis=1, ddof=ddof), f"numpy.{name}")


@PROPS
@given(
    name=st.sampled_from(["argmax", "argmin"]),
    dt=st.sampled_from(DTYPES),
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=6),
    keepdims=st.booleans(),
    use_axis=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_argmax_argmin_first_occurrence(device, name, dt, shape, keepdims, use_axis, seed):
    a = random_array(seed, shape, dt) % 3 if dt != np.bool_ else random_array(seed, shape, dt)
    axis = len(shape) - 1 if use_axis else None
    got = BACKENDS[f"numpy.{name}"](to_dev(a, device), axis=axis, keepdims=keepdims)
    assert_matches(got, getattr(np, name)(a, axis=axis, keepdims=keepdims), f"numpy.{name}")


@PROPS
@given(
    dt=st.sampled_from(DTYPES[1:]),
    axis=st.sampled_from([None, 0, 1]),
    seed=st.integers(0, 2**32 - 1),
)
def test_cumsum(device, dt, axis, seed):
    a = random_array(seed, (4, 5), dt)
    if dt == np.float16:
        with pytest.raises(UnsupportedOperation):
            BACKENDS["numpy.cumsum"](to_dev(a, device), axis=axis)
        return
    got = BACKENDS["numpy.cumsum"](to_dev(a, device), axis=axis)
    assert_matches(got, np.cumsum(a, axis=axis), "numpy.cumsum")


def test_accumulator_dtypes_are_numpys(device):
    u8 = to_dev(np.full((300,), 255, dtype=np.uint8), device)
    total = BACKENDS["numpy.sum"](u8)
    assert total.dtype == torch.uint64 and int(total) == 255 * 300
    assert BACKENDS["numpy.mean"](u8).dtype == torch.float64
    assert BACKENDS["numpy.sum"](to_dev(np.ones(3, np.int8), device)).dtype == torch.int64
    f16 = to_dev(np.full((4096,), 0.1, dtype=np.float16), device)
    assert_matches(BACKENDS["numpy.mean"](f16), np.mean(np.full((4096,), 0.1, np.float16)), "x")
    assert BACKENDS["numpy.ndarray.max"](u8, axis=0).dtype == torch.uint8


def test_unsupported_arguments(device):
    t = to_dev(np.ones((2, 3), dtype=np.float32), device)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.sum"](t, out=t)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.max"](t, initial=5.0)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.mean"](t, axis=2)


def test_all_and_any_of_empty_arrays() -> None:
    empty = np.zeros((0,), np.float32)
    assert migrated_call("numpy.all")(empty) == np.all(empty)
    assert migrated_call("numpy.any")(empty) == np.any(empty)
    assert type(migrated_call("numpy.all")(empty)) is type(np.all(empty))
    grid = np.zeros((0, 3), np.int16)
    np.testing.assert_array_equal(migrated_call("numpy.all")(grid, axis=0), np.all(grid, axis=0))


VIEW_NAMES = ["sum", "mean", "min", "max", "all", "any"]


@st.composite
def broadcast_view(draw):
    """A random array broadcast to a larger shape: new leading axes and length-1 axes repeated."""
    shape, axis = draw(array_and_axis())
    lead = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=5))
    base = tuple(1 if draw(st.booleans()) else n for n in shape)
    full = lead + shape
    if axis is not None:  # the same axes, counted in the view
        axis = axis + len(lead) if isinstance(axis, int) and axis >= 0 else axis
        if isinstance(axis, tuple):
            axis = tuple(a + len(lead) for a in axis)
    return base, full, axis


@PROPS
@given(
    name=st.sampled_from(VIEW_NAMES),
    dt=st.sampled_from(DTYPES),
    view=broadcast_view(),
    keepdims=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_reductions_of_broadcast_views_match_numpy(name, dt, view, keepdims, seed):
    base_shape, full, axis = view
    if name == "sum" and (dt == np.float16 or np.dtype(dt).kind == "u"):
        return  # left to NumPy: float16 sums, and uint64 sums of unsigned integers (declared)
    a = np.broadcast_to(random_array(seed, base_shape, dt), full)
    got = migrated_call(f"numpy.{name}")(a, axis=axis, keepdims=keepdims)
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(a, axis=axis, keepdims=keepdims)
    assert_matches(got, expected, f"numpy.{name}")
    if isinstance(got, np.ndarray) and got.ndim:  # a result of its own, like NumPy's
        assert got.flags.writeable and (got.size <= 1 or 0 not in got.strides)
        assert not np.shares_memory(got, a)


@pytest.mark.parametrize("name", VIEW_NAMES)
def test_a_broadcast_view_is_reduced_without_expanding_it(device, name) -> None:
    """A view of 3e12 elements (24 TB if expanded) is reduced over its 3 distinct values."""
    view = torch.arange(3.0, dtype=torch.float64, device=device).expand(10**6, 10**6, 3)
    expected = {"sum": 3e12, "mean": 1.0, "min": 0.0, "max": 2.0, "all": False, "any": True}
    assert BACKENDS[f"numpy.{name}"](view).item() == expected[name]
    per_pixel = BACKENDS[f"numpy.{name}"](view, axis=(0, 1))
    assert per_pixel.shape == (3,)
    if name in ("min", "max"):
        torch.testing.assert_close(per_pixel.cpu(), torch.arange(3.0, dtype=torch.float64))


def test_a_kept_repeated_axis_is_written_out_not_aliased() -> None:
    a = np.broadcast_to(np.arange(3.0), (40, 50, 3))
    got = migrated_call("numpy.max")(a, axis=2)
    np.testing.assert_array_equal(got, np.full((40, 50), 2.0))
    assert got.flags.c_contiguous and got.flags.writeable
    got[0, 0] = -1.0
    assert got[1, 1] == 2.0  # every element is its own
    integers = np.broadcast_to(np.array([[200], [-255]], np.int16), (2, 10**6))
    total = migrated_call("numpy.sum")(integers)  # each distinct value times its repeats
    assert type(total) is np.int64 and total == -55 * 10**6

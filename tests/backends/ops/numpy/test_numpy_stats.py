"""NumPy order statistics and norms against NumPy: median, percentile, quantile, sort, norm."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from migrate_support import PROPS, assert_matches, device_fixture, random_array, to_dev  # noqa: F401
from test_numpy_reduce import array_and_axis

from codedag.backends.ops.numpy import BACKENDS
from codedag.errors import UnsupportedOperation

DTYPES = [np.uint8, np.int16, np.int64, np.float32, np.float64]


@PROPS
@given(
    dt=st.sampled_from(DTYPES),
    shape_axis=array_and_axis(),
    keepdims=st.booleans(),
    q=st.one_of(st.floats(0, 100), st.lists(st.floats(0, 100), min_size=1, max_size=3).map(tuple)),
    seed=st.integers(0, 2**32 - 1),
    nan=st.booleans(),
)
def test_order_statistics(device, dt, shape_axis, keepdims, q, seed, nan):
    shape, axis = shape_axis
    a = random_array(seed, shape, dt)
    if nan and a.dtype.kind == "f":
        a.flat[0] = np.nan
    t = to_dev(a, device)
    got = BACKENDS["numpy.median"](t, axis=axis, keepdims=keepdims)
    assert_matches(got, np.median(a, axis=axis, keepdims=keepdims), "numpy.median")
    got = BACKENDS["numpy.percentile"](t, q, axis=axis, keepdims=keepdims)
    assert_matches(got, np.percentile(a, q, axis=axis, keepdims=keepdims), "numpy.percentile")
    qq = q / 100 if isinstance(q, float) else tuple(v / 100 for v in q)
    got = BACKENDS["numpy.quantile"](t, qq, axis=axis, keepdims=keepdims)
    assert_matches(got, np.quantile(a, qq, axis=axis, keepdims=keepdims), "numpy.quantile")


@PROPS
@given(dt=st.sampled_from(DTYPES), seed=st.integers(0, 2**32 - 1), axis=st.sampled_from([0, 1]))
def test_sort_and_stable_argsort(device, dt, seed, axis):
    a = random_array(seed, (6, 7), dt) % 5  # many ties
    t = to_dev(a, device)
    assert_matches(BACKENDS["numpy.sort"](t, axis), np.sort(a, axis), "numpy.sort")
    assert_matches(BACKENDS["numpy.sort"](t, None), np.sort(a, None), "numpy.sort")
    got = BACKENDS["numpy.argsort"](t, axis, kind="stable")
    assert_matches(got, np.argsort(a, axis, kind="stable"), "numpy.argsort")
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.argsort"](t, axis)  # quicksort: NumPy leaves the tie order unspecified


@PROPS
@given(
    dt=st.sampled_from(DTYPES),
    ord_=st.sampled_from([None, 1, 2, 3, np.inf, -np.inf]),
    axis=st.sampled_from([None, 0, 1]),
    keepdims=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_vector_norms(device, dt, ord_, axis, keepdims, seed):
    a = random_array(seed, (5, 6), dt)
    if axis is None and ord_ is not None:
        a = a[0]
    t = to_dev(a, device)
    got = BACKENDS["numpy.linalg.norm"](t, ord_, axis, keepdims)
    assert_matches(got, np.linalg.norm(a, ord_, axis, keepdims), "numpy.linalg.norm")

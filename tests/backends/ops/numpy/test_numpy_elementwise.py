"""NumPy elementwise backends against NumPy: NEP 50 dtypes, wrapping, rounding, clip, astype."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from migrate_support import PROPS, assert_matches, device_fixture, random_array, refusal, to_dev  # noqa: F401

from codedag.backends.contract import DeclaredUnsupported
from codedag.backends.ops.numpy import BACKENDS
from codedag.backends.ops.numpy import elementwise as npops
from codedag.backends.probe import migrated_call
from codedag.errors import UnsupportedOperation

DTYPES = [np.bool_, np.uint8, np.int8, np.int16, np.int32, np.int64]
DTYPES += [np.float16, np.float32, np.float64]
FLOATS = [np.float16, np.float32, np.float64]
BINARY = [n for n in npops.ARITH if n != "power"] + list(npops.COMPARE)
UNARY = list(npops.UNARY) + list(npops.PREDICATE)


def _both(np_fn, backend, np_args, t_args, name, **kw):
    """Run NumPy and the backend; when NumPy raises, the backend must raise too."""
    with np.errstate(all="ignore"):
        try:
            expected = np_fn(*np_args, **kw)
        except Exception:
            with pytest.raises(Exception):  # noqa: B017 - UnsupportedOperation or NumPy's own error
                backend(*t_args, **kw)
            return
    assert_matches(backend(*t_args, **kw), expected, name)


@PROPS
@given(
    name=st.sampled_from(BINARY),
    dt1=st.sampled_from(DTYPES),
    dt2=st.sampled_from(DTYPES),
    shape=hnp.array_shapes(min_dims=1, max_dims=3, max_side=6),
    broadcast=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_binary_matches_numpy(device, name, dt1, dt2, shape, broadcast, seed):
    a = random_array(seed, shape, dt1)
    b = random_array(seed + 1, shape[-1:] if broadcast else shape, dt2)
    fn = BACKENDS[f"numpy.{name}"]
    _both(getattr(np, name), fn, (a, b), (to_dev(a, device), to_dev(b, device)), f"numpy.{name}")


@PROPS
@given(
    name=st.sampled_from(BINARY),
    dt=st.sampled_from(DTYPES),
    scalar=st.one_of(st.integers(-300, 300), st.floats(-50, 50, allow_nan=False), st.booleans()),
    seed=st.integers(0, 2**32 - 1),
)
def test_binary_with_python_scalar_is_weak(device, name, dt, scalar, seed):
    a = random_array(seed, (3, 5), dt)
    fn = BACKENDS[f"numpy.{name}"]
    _both(getattr(np, name), fn, (a, scalar), (to_dev(a, device), scalar), f"numpy.{name}")
    _both(getattr(np, name), fn, (scalar, a), (scalar, to_dev(a, device)), f"numpy.{name}")


@PROPS
@given(
    name=st.sampled_from(UNARY),
    dt=st.sampled_from(DTYPES),
    shape=hnp.array_shapes(min_dims=0, max_dims=3, max_side=6),
    seed=st.integers(0, 2**32 - 1),
)
def test_unary_matches_numpy(device, name, dt, shape, seed):
    a = random_array(seed, shape, dt)
    if name in ("arccos", "arcsin", "arctanh") and a.dtype.kind == "f":
        a = (a / 40).clip(-1, 1).astype(dt)
    fn = BACKENDS[f"numpy.{name}"]
    if name == "reciprocal" and a.dtype.kind in "iub":
        with pytest.raises(UnsupportedOperation):  # C integer division by each element
            fn(to_dev(a, device))
        return
    _both(getattr(np, name), fn, (a,), (to_dev(a, device),), f"numpy.{name}")


EXTREMES = [1.5, -3.25, 0.0, -0.0, 7.0, 0.7, -0.7, 1e300, -1e300, 1e-310, -1e-310, 2.2e-309]
EXTREMES += [5e-324, 1e-40, 65000.0, float("inf"), float("-inf"), float("nan")]


@pytest.mark.parametrize("name", ["remainder", "fmod", "floor_divide"])
@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
def test_remainders_match_numpy_where_the_quotient_overflows(device, name, dt):
    # every pair of extremes (subnormal divisors, 1e300 by 1e-310, signed zeros), as vectors long
    # enough for torch's vectorized kernels, whose quotient overflows to NaN there
    values = np.array(EXTREMES, dtype=dt)
    a, b = (x.ravel() for x in np.meshgrid(values, values))
    with np.errstate(all="ignore"):
        _both(
            getattr(np, name),
            BACKENDS[f"numpy.{name}"],
            (a, b),
            (to_dev(a, device), to_dev(b, device)),
            f"numpy.{name}",
        )
        _both(
            getattr(np, name),
            BACKENDS[f"numpy.{name}"],
            (a, 1e-310),
            (to_dev(a, device), 1e-310),
            f"numpy.{name}",
        )


@pytest.mark.parametrize("name", ["floor_divide", "remainder", "divide"])
def test_half_floats_divide_as_numpy_rounds_them(device, name):
    # NumPy computes a half quotient in single precision and rounds it once; torch's half
    # kernel rounds each intermediate (65000 // 7 came out 9288 against NumPy's 9280)
    rng = np.random.default_rng(0)
    a = rng.uniform(-65000, 65000, 50_000).astype(np.float16)
    b = rng.uniform(-100, 100, 50_000).astype(np.float16)
    a[:2], b[:2] = 65000, 7
    with np.errstate(all="ignore"):
        expected = getattr(np, name)(a, b)
    got = BACKENDS[f"numpy.{name}"](to_dev(a, device), to_dev(b, device))
    assert got.dtype == torch.float16
    np.testing.assert_array_equal(got.cpu().numpy(), expected)


@PROPS
@given(
    dt=st.sampled_from([np.uint8, np.int8, np.int32, np.int64, np.float32, np.float64]),
    exponent=st.integers(-2, 5),
    seed=st.integers(0, 2**32 - 1),
)
def test_power_wraps_and_rejects_negative_integer_exponents(device, dt, exponent, seed):
    a = random_array(seed, (4, 4), dt)
    e = np.full((4, 4), exponent, dtype=np.int8)
    fn = BACKENDS["numpy.power"]
    _both(np.power, fn, (a, e), (to_dev(a, device), to_dev(e, device)), "numpy.power")


def test_numpy_promotion_rules(device):
    u8 = np.array([200, 100, 7], dtype=np.uint8)
    t = to_dev(u8, device)
    added = BACKENDS["numpy.add"](t, t)
    assert added.dtype == torch.uint8 and added.tolist() == [144, 200, 14]  # wraps, unlike cv2
    assert BACKENDS["numpy.add"](t, 1.5).dtype == torch.float64
    assert BACKENDS["numpy.divide"](t, t).dtype == torch.float64
    assert BACKENDS["numpy.divide"](to_dev(np.arange(3, dtype=np.int16), device), 2).dtype == (
        torch.float64
    )
    assert BACKENDS["numpy.sqrt"](t).dtype == torch.float16
    assert BACKENDS["numpy.mean"](t).dtype == torch.float64
    i8 = to_dev(np.array([1], dtype=np.int8), device)
    assert BACKENDS["numpy.add"](t, i8).dtype == torch.int16
    f32 = to_dev(np.array([1], dtype=np.float32), device)
    assert BACKENDS["numpy.multiply"](to_dev(np.array([3]), device), f32).dtype == torch.float64
    with pytest.raises(UnsupportedOperation, match="300"):
        BACKENDS["numpy.add"](t, 300)  # NumPy raises OverflowError; the original reports it
    assert BACKENDS["numpy.greater"](t, -1).tolist() == [True, True, True]


@PROPS
@given(
    dt=st.sampled_from(DTYPES[1:]),
    lo=st.one_of(st.none(), st.integers(-300, 300), st.floats(-20, 20)),
    hi=st.one_of(st.none(), st.integers(-300, 300), st.floats(-20, 20)),
    seed=st.integers(0, 2**32 - 1),
)
def test_clip_matches_numpy(device, dt, lo, hi, seed):
    a = random_array(seed, (5, 7), dt)
    if lo is None and hi is None:
        with pytest.raises(UnsupportedOperation):
            BACKENDS["numpy.clip"](to_dev(a, device), lo, hi)
        return
    _both(np.clip, BACKENDS["numpy.clip"], (a, lo, hi), (to_dev(a, device), lo, hi), "numpy.clip")


def test_clip_with_array_bounds_and_nan(device):
    a = np.array([[np.nan, -3.0, 0.5, 9.0]], dtype=np.float32)
    lo = np.array([0.0, 0.0, 1.0, 0.0], dtype=np.float32)
    got = BACKENDS["numpy.clip"](to_dev(a, device), to_dev(lo, device), 4)
    assert_matches(got, np.clip(a, lo, 4), "numpy.clip")


@PROPS
@given(
    dt1=st.sampled_from(DTYPES),
    dt2=st.sampled_from(DTYPES),
    seed=st.integers(0, 2**32 - 1),
    scalar=st.booleans(),
)
def test_where_matches_numpy(device, dt1, dt2, seed, scalar):
    cond = random_array(seed, (4, 6), np.uint8) % 3
    x = random_array(seed + 1, (4, 6), dt1)
    y = 7 if scalar else random_array(seed + 2, (1, 6), dt2)
    ty = 7 if scalar else to_dev(y, device)
    got = BACKENDS["numpy.where"](to_dev(cond, device), to_dev(x, device), ty)
    assert_matches(got, np.where(cond, x, y), "numpy.where")
    idx = BACKENDS["numpy.where"](to_dev(cond, device))
    for g, e in zip(idx, np.where(cond), strict=True):
        assert_matches(g, e, "numpy.where")


@PROPS
@given(
    dt=st.sampled_from([np.float16, np.float32, np.float64, np.int32, np.uint8]),
    decimals=st.integers(-2, 3),
    seed=st.integers(0, 2**32 - 1),
)
def test_round_matches_numpy(device, dt, decimals, seed):
    a = random_array(seed, (6, 6), dt)
    if a.dtype.kind == "f":  # exact halves exercise round-half-to-even
        a[0] = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 0.125], dtype=dt)
    if dt == np.float16 and decimals != 0:
        decimals = 0  # NumPy scales in float16 there; see the tolerance note
    if a.dtype.kind in "iu" and decimals < 0:
        with pytest.raises(UnsupportedOperation):
            BACKENDS["numpy.round"](to_dev(a, device), decimals)
        return
    _both(
        np.round,
        BACKENDS["numpy.round"],
        (a,),
        (to_dev(a, device),),
        "numpy.round",
        decimals=decimals,
    )


@PROPS
@given(
    src=st.sampled_from(DTYPES),
    dst=st.sampled_from([*DTYPES, np.uint16, np.uint32, np.complex64, "f4", float, int]),
    seed=st.integers(0, 2**32 - 1),
)
def test_astype_matches_numpy(device, src, dst, seed):
    a = random_array(seed, (3, 4), src)
    if a.dtype.kind == "f" and np.dtype(dst).kind in "iub":
        info = np.iinfo(dst) if np.dtype(dst).kind in "iu" else None
        if info is not None:  # out-of-range float to int casts are undefined behaviour in C
            a = np.clip(a, max(info.min, -1000), min(info.max, 1000)).astype(src)
    got = BACKENDS["numpy.ndarray.astype"](to_dev(a, device), dst)
    assert_matches(got, a.astype(dst), "numpy.ndarray.astype")


def test_astype_casting_rule_is_numpy(device):
    t = to_dev(np.ones(3, dtype=np.float64), device)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.ndarray.astype"](t, np.uint8, casting="safe")
    assert BACKENDS["numpy.ndarray.astype"](t, np.float32, casting="same_kind").dtype == (
        torch.float32
    )


def test_out_and_where_arguments_are_refused(device):
    t = to_dev(np.ones(3, dtype=np.float32), device)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.add"](t, t, out=t)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.exp"](t, where=np.array([True, False, True]))
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.add"](1, 2)


def test_results_stay_on_the_input_device(device):
    t = to_dev(np.ones((2, 2), dtype=np.uint8), device)
    for name in ("numpy.add", "numpy.maximum", "numpy.greater"):
        assert BACKENDS[name](t, 3).device.type == device.type
    assert BACKENDS["numpy.exp"](t).device.type == device.type


def test_backends_keep_numpys_parameter_names() -> None:
    for name in ("add", "clip", "mean", "pad", "transpose", "concatenate"):
        ours = inspect.signature(BACKENDS[f"numpy.{name}"]).parameters
        first = next(iter(ours))
        assert first in {"x1", "a", "array", "arrays"}, (name, first)
    theirs = inspect.signature(np.mean).parameters
    assert list(inspect.signature(BACKENDS["numpy.mean"]).parameters)[:5] == list(theirs)[:5]


# -- differences found by running real augmentation code with every call migrated ---------------


def test_abs_of_complex_is_the_magnitude() -> None:
    z = np.array([3 + 4j, 1 - 1j], np.complex64)
    got = migrated_call("numpy.abs")(z)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, [5.0, np.sqrt(2)], rtol=3e-7)
    assert_matches(got, np.abs(z), "numpy.absolute")


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("numpy.clip", (2.5, 0.0, 1.0)),  # a scalar first argument
        ("numpy.round", (2.5,)),
        ("numpy.round", (np.float32(2.5),)),
        ("numpy.subtract", (np.arange(3, dtype=np.uint64), np.ones(3, np.uint64))),
    ],
    ids=["clip-scalar", "round-float", "round-numpy-scalar", "subtract-uint64"],
)
def test_calls_the_backend_cannot_run_are_declared_not_hidden(name: str, args: tuple) -> None:
    """These raised inside the backend and the fallback hid it; now the declaration refuses
    them before anything runs, with the reason counted."""
    reason = refusal(name, *args)
    assert reason
    with pytest.raises(DeclaredUnsupported, match=re.escape(reason[:20])):
        migrated_call(name)(*args)


@pytest.mark.parametrize("k", [1, 2, 3])
@pytest.mark.parametrize("shape", [(3, 4), (2, 3, 4)])
def test_ufuncs_on_rotated_and_mixed_views_have_numpys_layout(k: int, shape: tuple) -> None:
    """NumPy walks flipped views forwards and follows its inputs' memory order (C order where
    they disagree); torch's iterator and copies of flipped views would not."""
    b = np.arange(np.prod(shape)).reshape(shape) % 3 == 0
    r = np.rot90(b, k)
    f = np.asfortranarray(r)
    for name, args in [
        ("numpy.logical_and", (r, r)),
        ("numpy.logical_and", (r, f)),
        ("numpy.add", (f, np.ascontiguousarray(r).astype(np.int16))),
        ("numpy.multiply", (f.astype(np.float32), 2.0)),
        ("numpy.sqrt", (r.astype(np.float64),)),
    ]:
        fn = getattr(np, name.rsplit(".", 1)[1])
        want = fn(*args)
        got = migrated_call(name)(*args)
        np.testing.assert_array_equal(got, want)
        assert (got.flags.c_contiguous, got.flags.f_contiguous) == (
            want.flags.c_contiguous,
            want.flags.f_contiguous,
        ), name
        assert got.strides == want.strides, name


@pytest.mark.parametrize("exponent", [2, -1])
def test_powers_numpy_computes_with_another_ufunc_are_bit_exact(exponent: float) -> None:
    """``x ** 2`` is NumPy's ``square`` (``-1``: ``reciprocal``), correctly rounded: ``pow`` of
    a tensor exponent is a unit in the last place off for some values."""
    from codedag.backends.ops.numpy._ufuncs import power as _power

    x = np.arange(256, dtype=np.uint8) / 255.0
    for values in (x, x.astype(np.float32)):
        got = _power(torch.from_numpy(values), torch.tensor(exponent, dtype=torch.float64))
        expected = values**exponent
        assert got.numpy().dtype == expected.dtype
        assert got.numpy().tobytes() == expected.tobytes()


@pytest.mark.parametrize("exponent", [2.0, 3.0])
def test_a_power_infers_its_shape_on_meta_tensors(exponent: float) -> None:
    """Batched execution infers shapes on meta tensors, which have no value to read."""
    from codedag.backends.ops.numpy._ufuncs import power as _power

    base = torch.empty((4, 3), device="meta", dtype=torch.float32)
    out = _power(base, torch.tensor(exponent, device="meta"))
    assert out.shape == (4, 3) and out.dtype == torch.float32 and out.device.type == "meta"

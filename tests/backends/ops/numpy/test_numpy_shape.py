"""NumPy shape, padding, flip and product backends against NumPy."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from migrate_support import PROPS, assert_matches, device_fixture, random_array, to_dev  # noqa: F401

from codedag.backends.ops.numpy import BACKENDS
from codedag.backends.probe import migrated_call
from codedag.errors import UnsupportedOperation

DTYPES = [np.bool_, np.uint8, np.int16, np.int32, np.int64, np.float16, np.float32, np.float64]
SHAPES = hnp.array_shapes(min_dims=1, max_dims=4, min_side=1, max_side=5)


@PROPS
@given(dt=st.sampled_from(DTYPES), shape=SHAPES, data=st.data())
def test_axis_permutations(device, dt, shape, data):
    a = random_array(0, shape, dt)
    t = to_dev(a, device)
    perm = tuple(data.draw(st.permutations(range(len(shape)))))
    assert_matches(BACKENDS["numpy.transpose"](t), np.transpose(a), "numpy.transpose")
    assert_matches(BACKENDS["numpy.transpose"](t, perm), np.transpose(a, perm), "numpy.transpose")
    assert_matches(BACKENDS["numpy.ndarray.transpose"](t, *perm), a.transpose(*perm), "x")
    i, j = data.draw(st.integers(0, len(shape) - 1)), data.draw(st.integers(-len(shape), -1))
    assert_matches(BACKENDS["numpy.swapaxes"](t, i, j), np.swapaxes(a, i, j), "numpy.swapaxes")
    assert_matches(BACKENDS["numpy.moveaxis"](t, i, j), np.moveaxis(a, i, j), "numpy.moveaxis")
    for k in range(len(shape)):
        assert_matches(BACKENDS["numpy.flip"](t, k), np.flip(a, k), "numpy.flip")
    assert_matches(BACKENDS["numpy.flip"](t), np.flip(a), "numpy.flip")
    assert_matches(BACKENDS["numpy.flipud"](t), np.flipud(a), "numpy.flipud")
    if len(shape) >= 2:
        assert_matches(BACKENDS["numpy.fliplr"](t), np.fliplr(a), "numpy.fliplr")
        k = data.draw(st.integers(-3, 5))
        axes = data.draw(st.sampled_from([(0, 1), (1, 0), (-1, 0), (0, -1)]))
        assert_matches(BACKENDS["numpy.rot90"](t, k, axes), np.rot90(a, k, axes), "numpy.rot90")


@PROPS
@given(dt=st.sampled_from(DTYPES), shape=SHAPES, order=st.sampled_from(["C", "F"]))
def test_reshape_orders(device, dt, shape, order):
    a = random_array(1, shape, dt)
    t = to_dev(a, device)
    new = (int(np.prod(shape)),) if len(shape) == 1 else (shape[0], -1)
    got = BACKENDS["numpy.reshape"](t, new, order=order)
    assert_matches(got, np.reshape(a, new, order=order), "numpy.reshape")
    assert_matches(BACKENDS["numpy.ndarray.reshape"](t, *new), a.reshape(*new), "x")
    assert_matches(BACKENDS["numpy.ravel"](t, order), np.ravel(a, order), "numpy.ravel")
    assert_matches(BACKENDS["numpy.expand_dims"](t, 0), np.expand_dims(a, 0), "x")
    assert_matches(BACKENDS["numpy.squeeze"](t), np.squeeze(a), "numpy.squeeze")


@PROPS
@given(
    dts=st.lists(st.sampled_from(DTYPES), min_size=1, max_size=4),
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
    data=st.data(),
)
def test_stack_and_concatenate_promote_like_numpy(device, dts, shape, data):
    arrays = [random_array(i, shape, dt) for i, dt in enumerate(dts)]
    ts = [to_dev(a, device) for a in arrays]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    assert_matches(BACKENDS["numpy.stack"](ts, axis), np.stack(arrays, axis), "numpy.stack")
    cat_axis = data.draw(st.one_of(st.none(), st.integers(-len(shape), len(shape) - 1)))
    got = BACKENDS["numpy.concatenate"](ts, axis=cat_axis)
    assert_matches(got, np.concatenate(arrays, axis=cat_axis), "numpy.concatenate")
    assert_matches(BACKENDS["numpy.hstack"](ts), np.hstack(arrays), "numpy.hstack")
    assert_matches(BACKENDS["numpy.vstack"](ts), np.vstack(arrays), "numpy.vstack")


@PROPS
@given(
    dt=st.sampled_from(DTYPES),
    shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5),
    mode=st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap"]),
    data=st.data(),
)
def test_pad_matches_numpy(device, dt, shape, mode, data):
    a = random_array(2, shape, dt)
    per_axis = data.draw(st.booleans())
    if per_axis:
        width = tuple((data.draw(st.integers(0, 9)), data.draw(st.integers(0, 9))) for _ in shape)
    else:
        width = data.draw(st.integers(0, 9))
    kw = {}
    if mode == "constant" and dt != np.bool_:
        kw["constant_values"] = data.draw(st.integers(0, 100))
    got = BACKENDS["numpy.pad"](to_dev(a, device), width, mode, **kw)
    assert_matches(got, np.pad(a, width, mode, **kw), "numpy.pad")


def test_pad_rejects_other_modes(device):
    t = to_dev(np.ones((3, 3), np.float32), device)
    for mode in ("mean", "linear_ramp", "maximum"):
        with pytest.raises(UnsupportedOperation):
            BACKENDS["numpy.pad"](t, 1, mode)
    with pytest.raises(UnsupportedOperation):
        BACKENDS["numpy.pad"](t, 1, "reflect", reflect_type="odd")


@PROPS
@given(
    dt=st.sampled_from([np.uint8, np.int32, np.int64, np.float32, np.float64]),
    dims=st.sampled_from([(1, 1), (2, 2), (2, 1), (1, 2), (3, 2), (3, 3)]),
    seed=st.integers(0, 2**32 - 1),
)
def test_dot_and_matmul(device, dt, dims, seed):
    shapes = {1: (4,), 2: (3, 4), 3: (2, 3, 4)}
    a = random_array(seed, shapes[dims[0]], dt)
    b_shape = {1: (4,), 2: (4, 5), 3: (2, 4, 5)}[dims[1]]
    b = random_array(seed + 1, b_shape, dt)
    ta, tb = to_dev(a, device), to_dev(b, device)
    if device.type == "cuda" and a.dtype.kind in "iu":
        with pytest.raises(UnsupportedOperation):
            BACKENDS["numpy.dot"](ta, tb)
        return
    assert_matches(BACKENDS["numpy.dot"](ta, tb), np.dot(a, b), "numpy.dot")
    assert_matches(BACKENDS["numpy.matmul"](ta, tb), np.matmul(a, b), "numpy.matmul")


def test_tile_and_repeat(device):
    a = np.arange(6, dtype=np.int16).reshape(2, 3)
    t = to_dev(a, device)
    assert_matches(BACKENDS["numpy.tile"](t, (2, 1, 2)), np.tile(a, (2, 1, 2)), "numpy.tile")
    assert_matches(BACKENDS["numpy.repeat"](t, 3), np.repeat(a, 3), "numpy.repeat")
    assert_matches(BACKENDS["numpy.repeat"](t, 2, axis=1), np.repeat(a, 2, axis=1), "x")


# ------------------------------------------------------------ sizes decided before converting


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("numpy.pad", (np.zeros((2,) * 32, np.uint8), 1)),  # NumPy refuses it at once
        ("numpy.pad", (np.zeros((4, 4), np.uint8), 2**40)),
        ("numpy.tile", (np.zeros(4), (10**6, 10**6))),
        ("numpy.repeat", (np.zeros(4), 10**9)),
        ("numpy.add", (np.zeros((10**5, 1)), np.zeros((1, 10**5)))),  # a broadcast outer sum
    ],
)
def test_a_result_too_large_is_refused_before_anything_is_converted(
    name: str, args: tuple[object, ...]
) -> None:
    from codedag.backends.registry import default_registry

    reason = default_registry().get(name).quirks.check(*args)
    assert reason is not None and "stays in NumPy" in reason


def test_a_migrated_pad_numpy_refuses_fails_at_once_as_numpy_does() -> None:
    import time

    from codedag.migrate.api import PipelineMigrator

    plan = {"context_device_map": {"app.f#0/numpy.pad#0": "cpu"}}
    array = np.zeros((2,) * 32, np.uint8)
    with PipelineMigrator.from_plan(plan, guard=False) as migrator:
        started = time.perf_counter()
        with pytest.raises(ValueError, match="array is too big"):
            np.pad(array, 1)
        assert time.perf_counter() - started < 2.0
    assert migrator.get_stats()["functions"]["numpy.pad"]["fell_back"] == 1


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_stack_of_fortran_arrays_has_numpys_layout(axis: int) -> None:
    """NumPy lays a stack out after its inputs' strides (neither C nor F for F inputs)."""
    a = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    want = np.stack([a, a + 1], axis=axis)
    got = migrated_call("numpy.stack")([a, a + 1], axis=axis)
    np.testing.assert_array_equal(got, want)
    assert got.strides == want.strides

"""Value conversion: dtype, layout and contiguity are the library's; the device cache is safe."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codedag.backends.device_values import CallValues, ValueConverter, same_bytes
from codedag.errors import UnsupportedOperation

DTYPES = ["uint8", "int16", "int32", "int64", "float16", "float32", "float64", "bool", "uint16"]


@pytest.mark.parametrize("zero_copy", [True, False])
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_keeps_dtype_shape_and_values(dtype: str, zero_copy: bool) -> None:
    rng = np.random.default_rng(0)
    array = (rng.random((5, 7, 3)) * 100).astype(dtype)
    conv = ValueConverter("cpu", zero_copy=zero_copy)
    call = CallValues()
    tensor = conv.to_device(array, call)
    assert isinstance(tensor, torch.Tensor)
    assert str(tensor.dtype) == f"torch.{dtype}"  # shipped in its own dtype
    back = conv.tensor_to_array(tensor, "C")
    conv.finish(call)
    assert type(back) is np.ndarray and back.dtype == array.dtype
    assert back.flags.c_contiguous and back.flags.writeable
    np.testing.assert_array_equal(back, array)


@pytest.mark.parametrize("zero_copy", [True, False])
def test_output_layout_follows_the_requested_order(zero_copy: bool) -> None:
    conv = ValueConverter("cpu", zero_copy=zero_copy)
    base = torch.arange(24, dtype=torch.float32).reshape(4, 6)
    transposed = base.t()  # F-ordered view
    assert conv.tensor_to_array(transposed, "K").flags.f_contiguous
    assert conv.tensor_to_array(transposed, "C").flags.c_contiguous
    fortran = conv.tensor_to_array(base, "F")
    assert fortran.flags.f_contiguous
    np.testing.assert_array_equal(fortran, base.numpy())


def test_zero_copy_shares_memory_and_handles_negative_strides() -> None:
    conv = ValueConverter("cpu")
    array = np.arange(12, dtype=np.float32).reshape(3, 4)
    call = CallValues()
    tensor = conv.to_device(array, call)
    assert tensor.data_ptr() == array.ctypes.data  # the tensor is the array on the CPU
    flipped = array[::-1]
    np.testing.assert_array_equal(conv.to_device(flipped, call).numpy(), flipped)
    readonly = array.copy()
    readonly.flags.writeable = False
    np.testing.assert_array_equal(conv.to_device(readonly, call).numpy(), readonly)


def test_device_cache_reuses_unchanged_arrays_and_detects_writes() -> None:
    conv = ValueConverter("cpu", zero_copy=False)  # the path of a CUDA device, on the CPU
    device_result = torch.arange(60, dtype=torch.uint8).reshape(3, 4, 5)
    returned = conv.tensor_to_array(device_result, "C")
    call = CallValues()
    again = conv.to_device(returned, call)
    assert again is conv.cache.get(returned)  # the remembered device tensor, no transfer
    assert conv.cache.hits >= 1 and not call.staging
    returned[0, 0, 0] = 200  # the user writes into the array
    fresh = conv.to_device(returned, call)
    assert conv.cache.stale == 1
    assert int(fresh[0, 0, 0]) == 200  # shipped again: the device sees the user's write
    conv.finish(call)


def test_device_cache_forgets_dead_arrays() -> None:
    conv = ValueConverter("cpu", zero_copy=False)
    returned = conv.tensor_to_array(torch.ones(4, 4), "C")
    assert len(conv.cache) == 1
    del returned
    assert len(conv.cache) == 0


def test_unsupported_arrays_raise() -> None:
    conv = ValueConverter("cpu")
    with pytest.raises(UnsupportedOperation):
        conv.to_device(np.array(["a", "b"]), CallValues())
    with pytest.raises(UnsupportedOperation):
        conv.to_device(np.arange(3, dtype=">i4"), CallValues())


def test_same_bytes() -> None:
    a = np.arange(10, dtype=np.int32)
    assert same_bytes(a, a.copy())
    b = a.copy()
    b[3] = 0
    assert not same_bytes(a, b)
    assert same_bytes(a[::2], a[::2].copy())
    assert not same_bytes(a, a.astype(np.int64))


def test_a_broadcast_view_is_shipped_compact_and_reduced_without_materializing() -> None:
    import resource

    from codedag.backends.probe import migrated_call

    row = np.arange(4096, dtype=np.float64)
    view = np.broadcast_to(row, (4096, 4096))  # 128 MiB if materialized
    converter = ValueConverter("cpu")
    tensor = converter.array_to_tensor(view, CallValues())
    assert tensor.shape == view.shape and tensor.stride() == (0, 1)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for name, reference in (("numpy.sum", np.sum), ("numpy.mean", np.mean)):
        assert migrated_call(name)(view) == pytest.approx(reference(view))
        assert np.allclose(migrated_call(name)(view, axis=0), reference(view, axis=0))
    grown_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before
    assert grown_kib < 64 * 1024  # far below the 128 MiB of the materialized view


@pytest.mark.parametrize(
    ("name", "kwargs"),
    [
        ("numpy.argmax", {}),
        ("numpy.argmin", {"axis": 1}),
        ("numpy.cumsum", {"axis": 0}),
        ("numpy.median", {}),
        ("numpy.sort", {}),
        ("numpy.quantile", {"q": 0.25}),
    ],
)
def test_ops_that_would_copy_a_broadcast_view_leave_it_to_numpy(
    name: str, kwargs: dict[str, object]
) -> None:
    from codedag.backends.probe import migrated_call, original_function
    from codedag.backends.registry import default_registry

    row = np.arange(1024, dtype=np.float64)[::-1].copy()
    view = np.broadcast_to(row, (1024, 1024))  # 8 MiB materialized, 8 KiB distinct
    check = default_registry().get(name).quirks.check
    args = (view, kwargs.pop("q")) if "q" in kwargs else (view,)
    assert "broadcast view" in check(*args, **kwargs)
    assert check(np.ascontiguousarray(view), *args[1:], **kwargs) is None  # a real array: taken
    small = (np.broadcast_to(row[:8], (16, 8)), *args[1:])
    assert check(*small, **kwargs) is None  # a small view is taken, and computed as NumPy does
    expected = original_function(name)(*small, **kwargs)
    assert np.array_equal(migrated_call(name)(*small, **kwargs), expected)


def _views(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """An array of ``shape`` in one of several layouts: C, F, flipped, permuted, rotated."""
    a = np.zeros(shape)
    kind = int(rng.integers(0, 5))
    if kind == 1:
        return np.asfortranarray(a)
    if kind == 2:
        return np.flip(a, axis=int(rng.integers(a.ndim)))
    if kind == 3:
        p = rng.permutation(a.ndim)
        return np.transpose(np.ascontiguousarray(np.transpose(a, p)), np.argsort(p))
    if kind == 4:
        return np.rot90(np.ascontiguousarray(np.rot90(a, -1)))
    return a


def _big_strides(a: np.ndarray) -> list[int]:
    return [s for s, n in zip(a.strides, a.shape, strict=True) if n > 1]


def test_keep_order_lays_results_out_as_numpy_ufuncs_and_stack_do() -> None:
    from codedag.backends.device_values import keep_order, keep_order_axes, laid_out

    rng = np.random.default_rng(0)
    for _ in range(400):
        shape = tuple(int(v) for v in rng.integers(1, 5, int(rng.integers(2, 5))))
        a = _views(rng, shape)
        other = list(shape)
        if rng.random() < 0.3:
            other[int(rng.integers(len(shape)))] = 1  # broadcast
        b = _views(rng, tuple(other))
        want = np.add(a, b)
        assert _big_strides(keep_order(np.ascontiguousarray(want), [a, b])) == _big_strides(want)
        axis = int(rng.integers(0, len(shape) + 1))
        inputs = [a, _views(rng, shape)]
        stacked = np.stack(inputs, axis=axis)
        parts = [np.expand_dims(x, axis) for x in inputs]
        axes = keep_order_axes([(p.shape, p.strides) for p in parts], stacked.ndim, ufunc=False)
        assert _big_strides(laid_out(np.ascontiguousarray(stacked), axes)) == _big_strides(stacked)


@pytest.mark.parametrize("zero_copy", [True, False])
def test_views_of_one_result_tensor_come_back_as_views_of_one_array(zero_copy: bool) -> None:
    converter = ValueConverter("cpu", zero_copy=zero_copy)
    call = CallValues()
    built = torch.arange(12, dtype=torch.int64).reshape(6, 2)
    columns = [converter.tensor_to_array(c, "K", call) for c in built.unbind(1)]
    assert [c.strides for c in columns] == [(16,), (16,)]
    assert [c.tolist() for c in columns] == [list(range(0, 12, 2)), list(range(1, 12, 2))]
    assert np.may_share_memory(columns[0], columns[1])


def test_a_small_view_of_a_large_tensor_comes_back_alone() -> None:
    converter = ValueConverter("cpu", zero_copy=False)
    row = torch.arange(1000).reshape(10, 100)[:, 3]
    array = converter.tensor_to_array(row, "K", CallValues())
    assert array.flags.c_contiguous and array.tolist() == list(range(3, 1000, 100))

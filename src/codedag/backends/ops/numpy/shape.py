"""Torch backends of NumPy's shape functions, padding, flips and products.

``transpose``/``swapaxes``/``moveaxis``/``reshape`` return views where NumPy does. ``stack`` and
``concatenate`` promote mixed dtypes with ``numpy.result_type``. ``pad`` builds, axis after axis as
NumPy does, a gather index per axis for ``edge``, ``reflect``, ``symmetric`` and ``wrap`` (any pad
width, also wider than the axis) and concatenates constants for ``constant``; the other modes raise
UnsupportedOperation. ``dot``/``matmul`` of integers accumulate in int64 and wrap to NumPy's dtype;
CUDA has no integer matmul, so integer products on CUDA raise UnsupportedOperation.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import Tolerance
from codedag.backends.device_values import keep_order_axes
from codedag.backends.ops.numpy._adapter import ops_of
from codedag.backends.ops.numpy._common import (
    NUMPY_OF_TORCH,
    computable_tensor,
    norm_axes,
    require_default,
    result_type,
    torch_dtype,
)
from codedag.backends.ops.numpy._shape_checks import (
    check_concatenate,
    check_hstack,
    check_pad,
    check_repeat,
    check_stack,
    check_tile,
    check_vstack,
    product_check,
)
from codedag.errors import UnsupportedOperation


def transpose(a: torch.Tensor, axes: Sequence[int] | None = None) -> torch.Tensor:
    """``numpy.transpose``: reverses the axes by default."""
    a = computable_tensor(a)
    if axes is None:
        return a.permute(*reversed(range(a.dim())))
    perm = norm_axes(axes, a.dim())
    if perm is None or len(perm) != a.dim():
        raise UnsupportedOperation(f"axes {axes!r} do not match an array of {a.dim()} dims")
    return a.permute(*perm)


def ndarray_transpose(self: torch.Tensor, *axes: Any) -> torch.Tensor:
    """``numpy.ndarray.transpose``: axes as one tuple or as separate arguments."""
    if len(axes) == 1 and (axes[0] is None or not isinstance(axes[0], numbers.Integral)):
        return transpose(self, axes[0])
    return transpose(self, axes if axes else None)


def swapaxes(a: torch.Tensor, axis1: int, axis2: int) -> torch.Tensor:
    """``numpy.swapaxes``."""
    return computable_tensor(a).transpose(axis1, axis2)


def moveaxis(
    a: torch.Tensor, source: int | Sequence[int], destination: int | Sequence[int]
) -> torch.Tensor:
    """``numpy.moveaxis``."""
    a = computable_tensor(a)
    src = norm_axes(source, a.dim()) or ()
    dst = norm_axes(destination, a.dim()) or ()
    return torch.movedim(a, src, dst)


def reshape(
    a: torch.Tensor,
    shape: Any = None,
    order: str = "C",
    *,
    newshape: Any = None,
    copy: bool | None = None,
) -> torch.Tensor:
    """``numpy.reshape`` in C or Fortran order (``newshape`` is NumPy's older name)."""
    a = computable_tensor(a)
    shape = newshape if shape is None else shape
    if shape is None:
        raise UnsupportedOperation("reshape needs a shape")
    shp = (int(shape),) if isinstance(shape, numbers.Integral) else tuple(int(s) for s in shape)
    if order == "C":
        out = a.reshape(shp)
    elif order == "F":
        out = a.permute(*reversed(range(a.dim()))).reshape(shp[::-1])
        out = out.permute(*reversed(range(len(shp))))
    else:
        raise UnsupportedOperation(f"order={order!r} is not supported; expected 'C' or 'F'")
    return out.clone() if copy else out


def ndarray_reshape(self: torch.Tensor, *shape: Any, order: str = "C", copy: Any = None) -> Any:
    """``numpy.ndarray.reshape``: the shape as one tuple or as separate integers."""
    if len(shape) == 1 and not isinstance(shape[0], numbers.Integral):
        return reshape(self, shape[0], order=order, copy=copy)
    return reshape(self, shape, order=order, copy=copy)


def ravel(a: torch.Tensor, order: str = "C") -> torch.Tensor:
    """``numpy.ravel``."""
    return reshape(a, -1, order=order)


def flatten(self: torch.Tensor, order: str = "C") -> torch.Tensor:
    """``numpy.ndarray.flatten``: always a copy."""
    return reshape(self, -1, order=order).clone()


def expand_dims(a: torch.Tensor, axis: int | Sequence[int]) -> torch.Tensor:
    """``numpy.expand_dims``."""
    a = computable_tensor(a)
    axes: tuple[int, ...] = (
        (int(axis),) if isinstance(axis, int | np.integer) else tuple(int(v) for v in axis)
    )
    nd = a.dim() + len(axes)
    shape = iter(a.shape)
    pos = norm_axes(axes, nd) or ()
    return a.reshape([1 if i in pos else next(shape) for i in range(nd)])


def squeeze(a: torch.Tensor, axis: int | Sequence[int] | None = None) -> torch.Tensor:
    """``numpy.squeeze``; squeezing an axis whose length is not 1 is refused as NumPy does."""
    a = computable_tensor(a)
    dims = norm_axes(axis, a.dim())
    if dims is None:
        return a.reshape([s for s in a.shape if s != 1])
    if any(a.shape[d] != 1 for d in dims):
        raise UnsupportedOperation(f"cannot squeeze axes {dims} of shape {tuple(a.shape)}")
    return a.reshape([s for i, s in enumerate(a.shape) if i not in dims])


def _common(arrays: Sequence[Any], dtype: object) -> list[torch.Tensor]:
    tensors = [computable_tensor(t) for t in arrays]
    if not tensors:
        raise UnsupportedOperation("need at least one array")
    td = torch_dtype(dtype) if dtype is not None else torch_dtype(result_type(*tensors))
    return [t.to(td) for t in tensors]


def stack(
    arrays: Sequence[torch.Tensor],
    axis: int = 0,
    out: object = None,
    *,
    dtype: object = None,
    casting: str = "same_kind",
) -> torch.Tensor:
    """``numpy.stack``, laid out as NumPy lays it out after its inputs' strides."""
    require_default("out", out, None)
    ts = _common(arrays, dtype)
    result = torch.stack(ts, dim=axis)
    at = axis % result.dim() if result.dim() else 0
    operands = [(tuple(t.unsqueeze(at).shape), tuple(t.unsqueeze(at).stride())) for t in ts]
    axes = keep_order_axes(operands, result.dim(), ufunc=False)
    if axes == sorted(axes):
        return result
    inverse = sorted(range(len(axes)), key=axes.__getitem__)
    return result.permute(*axes).contiguous().permute(*inverse)


def concatenate(
    arrays: Sequence[torch.Tensor],
    axis: int | None = 0,
    out: object = None,
    *,
    dtype: object = None,
    casting: str = "same_kind",
) -> torch.Tensor:
    """``numpy.concatenate``; ``axis=None`` flattens first."""
    require_default("out", out, None)
    ts = _common(arrays, dtype)
    if axis is None:
        return torch.cat([t.reshape(-1) for t in ts])
    return torch.cat(ts, dim=axis)


def hstack(tup: Sequence[torch.Tensor], *, dtype: object = None, casting: str = "same_kind") -> Any:
    """``numpy.hstack``: axis 1, or 0 for 1-D arrays."""
    ts = [t.reshape(1) if t.dim() == 0 else t for t in _common(tup, dtype)]
    return torch.cat(ts, dim=0 if ts[0].dim() == 1 else 1)


def vstack(tup: Sequence[torch.Tensor], *, dtype: object = None, casting: str = "same_kind") -> Any:
    """``numpy.vstack``: 1-D arrays become rows."""
    ts = [t.reshape(1, -1) if t.dim() < 2 else t for t in _common(tup, dtype)]
    return torch.cat(ts, dim=0)


def flip(m: torch.Tensor, axis: int | Sequence[int] | None = None) -> torch.Tensor:
    """``numpy.flip`` (all axes when ``axis`` is None)."""
    m = computable_tensor(m)
    dims = norm_axes(axis, m.dim())
    return m.flip(dims if dims is not None else tuple(range(m.dim())))


def fliplr(m: torch.Tensor) -> torch.Tensor:
    """``numpy.fliplr``: reverse axis 1."""
    if computable_tensor(m).dim() < 2:
        raise UnsupportedOperation("fliplr needs an array of at least 2 dims")
    return m.flip(1)


def flipud(m: torch.Tensor) -> torch.Tensor:
    """``numpy.flipud``: reverse axis 0."""
    if computable_tensor(m).dim() < 1:
        raise UnsupportedOperation("flipud needs an array of at least 1 dim")
    return m.flip(0)


def rot90(m: torch.Tensor, k: int = 1, axes: Sequence[int] = (0, 1)) -> torch.Tensor:
    """``numpy.rot90``: from the first axis towards the second, as torch.rot90 does."""
    return torch.rot90(computable_tensor(m), int(k), list(axes))


def tile(A: torch.Tensor, reps: int | Sequence[int]) -> torch.Tensor:
    """``numpy.tile`` (a new array: torch returns a stride-0 view where a repetition is 0)."""
    reps_t = (int(reps),) if isinstance(reps, int | np.integer) else tuple(int(r) for r in reps)
    return torch.tile(computable_tensor(A), reps_t).contiguous()


def repeat(a: torch.Tensor, repeats: int, axis: int | None = None) -> torch.Tensor:
    """``numpy.repeat`` with an integer count."""
    a = computable_tensor(a)
    if not isinstance(repeats, numbers.Integral):
        raise UnsupportedOperation("only an integer repeat count is supported")
    if axis is None:
        return a.reshape(-1).repeat_interleave(int(repeats))
    return a.repeat_interleave(int(repeats), dim=axis)


def _pad_index(n: int, before: int, after: int, mode: str, device: torch.device) -> torch.Tensor:
    i = torch.arange(-before, n + after, device=device)
    if mode == "edge":
        return i.clamp(0, n - 1)
    if mode == "wrap":
        return i.remainder(n)
    if mode == "symmetric":
        j = i.remainder(2 * n)
        return torch.where(j < n, j, 2 * n - 1 - j)
    if n == 1:  # reflect of a single element repeats it
        return torch.zeros_like(i)
    j = i.remainder(2 * (n - 1))
    return torch.where(j < n, j, 2 * (n - 1) - j)


def _pad_widths(pad_width: object, ndim: int) -> list[tuple[int, int]]:
    pw = np.asarray(pad_width)
    if pw.dtype.kind not in "iu" or pw.size == 0:
        raise UnsupportedOperation(f"pad_width {pad_width!r} must hold integers")
    try:
        pw = np.broadcast_to(pw.reshape(-1, 2) if pw.size > 2 else pw.reshape(1, -1), (ndim, 2))
    except ValueError as e:
        raise UnsupportedOperation(f"pad_width {pad_width!r} does not fit {ndim} dims") from e
    if (pw < 0).any():
        raise UnsupportedOperation("negative pad widths are refused by NumPy")
    return [(int(b), int(a)) for b, a in pw]


def pad(array: torch.Tensor, pad_width: object, mode: str = "constant", **kwargs: Any) -> Any:
    """``numpy.pad`` with modes constant, edge, reflect, symmetric and wrap."""
    x = computable_tensor(array)
    widths = _pad_widths(pad_width, x.dim())
    if mode == "constant":
        cv = kwargs.pop("constant_values", 0)
        vals = _pad_widths_values(cv, x.dim())
    elif mode in ("edge", "reflect", "symmetric", "wrap"):
        if kwargs.pop("reflect_type", "even") != "even":
            raise UnsupportedOperation("reflect_type='odd' is not supported")
        vals = []
    else:
        raise UnsupportedOperation(
            f"pad mode {mode!r} is not supported; expected constant, edge, reflect, symmetric, wrap"
        )
    if kwargs:
        raise UnsupportedOperation(f"unexpected pad arguments {sorted(kwargs)}")
    for d, (b, a) in enumerate(widths):
        if b == 0 and a == 0:
            continue
        if mode == "constant":
            parts = []
            for width, value in ((b, vals[d][0]), (a, vals[d][1])):
                shp = list(x.shape)
                shp[d] = width
                parts.append(_const_block(shp, value, x))
            x = torch.cat([parts[0], x, parts[1]], dim=d)
        else:
            if x.shape[d] == 0:
                raise UnsupportedOperation(f"cannot pad an empty axis in mode {mode!r}")
            x = x.index_select(d, _pad_index(x.shape[d], b, a, mode, x.device))
    return x


def _pad_widths_values(cv: object, ndim: int) -> list[tuple[Any, Any]]:
    arr = np.asarray(cv, dtype=object)
    if arr.ndim == 0:
        return [(cv, cv)] * ndim
    flat = np.broadcast_to(arr.reshape(-1, 2) if arr.size > 2 else arr.reshape(1, -1), (ndim, 2))
    return [(b, a) for b, a in flat]


def _const_block(shape: list[int], value: object, like: torch.Tensor) -> torch.Tensor:
    # NumPy casts the constant to the array's dtype (float to int truncates).
    v = np.asarray(value).astype(NUMPY_OF_TORCH[like.dtype])
    return torch.full(shape, v.item(), dtype=like.dtype, device=like.device)


def _product_dtype(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.dtype, torch.dtype]:
    res = torch_dtype(result_type(a, b))
    if res.is_floating_point or res.is_complex:
        return res, res
    return res, torch.int64


def dot(a: torch.Tensor, b: torch.Tensor, out: object = None) -> torch.Tensor:
    """``numpy.dot``: inner product, matrix product, or sum over a's last and b's 2nd-last axis."""
    require_default("out", out, None)
    a, b = computable_tensor(a), computable_tensor(b)
    res, acc = _product_dtype(a, b)
    x, y = _host_if_integer(a.to(acc)), _host_if_integer(b.to(acc))
    if x.dim() == 0 or y.dim() == 0:
        r = x * y
    elif y.dim() == 1:
        r = torch.tensordot(x, y, dims=([x.dim() - 1], [0]))
    else:
        r = torch.tensordot(x, y, dims=([x.dim() - 1], [y.dim() - 2]))
    return r.to(device=a.device, dtype=res)


def _host_if_integer(t: torch.Tensor) -> torch.Tensor:
    """Integer products run on the CPU: CUDA has no integer matmul kernel."""
    return t.cpu() if not (t.is_floating_point() or t.is_complex()) else t


def matmul(x1: torch.Tensor, x2: torch.Tensor, /, out: object = None, **kwargs: Any) -> Any:
    """``numpy.matmul`` (broadcast batches, 1-D operands promoted and removed as NumPy does)."""
    require_default("out", out, None)
    if kwargs:
        raise UnsupportedOperation(f"matmul arguments {sorted(kwargs)} are not supported")
    a, b = computable_tensor(x1), computable_tensor(x2)
    if a.dim() == 0 or b.dim() == 0:
        raise UnsupportedOperation("matmul of a 0-d array is an error in NumPy")
    res, acc = _product_dtype(a, b)
    out = torch.matmul(_host_if_integer(a.to(acc)), _host_if_integer(b.to(acc)))
    return out.to(device=a.device, dtype=res)


BACKENDS: dict[str, Callable[..., Any]] = {
    "numpy.transpose": transpose,
    "numpy.ndarray.transpose": ndarray_transpose,
    "numpy.swapaxes": swapaxes,
    "numpy.ndarray.swapaxes": swapaxes,
    "numpy.moveaxis": moveaxis,
    "numpy.reshape": reshape,
    "numpy.ndarray.reshape": ndarray_reshape,
    "numpy.ravel": ravel,
    "numpy.ndarray.ravel": ravel,
    "numpy.ndarray.flatten": flatten,
    "numpy.expand_dims": expand_dims,
    "numpy.squeeze": squeeze,
    "numpy.stack": stack,
    "numpy.concatenate": concatenate,
    "numpy.hstack": hstack,
    "numpy.vstack": vstack,
    "numpy.flip": flip,
    "numpy.fliplr": fliplr,
    "numpy.flipud": flipud,
    "numpy.rot90": rot90,
    "numpy.tile": tile,
    "numpy.repeat": repeat,
    "numpy.pad": pad,
    "numpy.dot": dot,
    "numpy.ndarray.dot": dot,
    "numpy.matmul": matmul,
}

# Shape functions are exact (no tolerance).
PRODUCTS = Tolerance(
    atol=1e-3,
    rtol=1e-5,
    note="float32 accumulation in another order (BLAS vs torch): a few float32 ulp of sum(|a*b|), "
    "below 1e-3 for the O(1e3) magnitudes tested; integer products are exact",
)
OPS = ops_of(
    BACKENDS,
    {
        "concatenate": {"check": check_concatenate},
        "stack": {"check": check_stack},
        "hstack": {"check": check_hstack},
        "vstack": {"check": check_vstack},
        "pad": {"check": check_pad},
        "tile": {"check": check_tile},
        "repeat": {"check": check_repeat},
        "dot": {"check": product_check("dot"), "tolerance": PRODUCTS},
        "matmul": {"check": product_check("matmul"), "tolerance": PRODUCTS},
    },
)

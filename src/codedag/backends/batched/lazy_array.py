"""The deferred NumPy array: what the chain's array calls return inside ``__getitem__``.

A :class:`LazyArray` records NumPy's operators and ufuncs (``__array_ufunc__``), the NumPy
functions of :mod:`.views` (``__array_function__``), ``astype``/``transpose``/``reshape``/
``copy``/``clip``/static indexing; ``shape``, ``dtype``, ``ndim``, ``size``, ``nbytes`` and
``len`` are answered without computing. The rest forces it (:mod:`.recorder`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import codedag.backends.batched.ops as _ops
import codedag.backends.batched.views as _views
from codedag.backends.batched.ops import Op
from codedag.backends.batched.recorder import (
    KINDS,
    Lazy,
    _forced_call,
    _stacked,
    call,
    recording_inplace,
)
from codedag.backends.lazy_values import RecordsNumpy, install_recording_operators

_UFUNC_OPS: dict[Any, tuple[Op | None, str]] = {}


def _ufunc_call(ufunc: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    found = _UFUNC_OPS.get(ufunc)
    if found is None:
        name = f"numpy.{ufunc.__name__}"
        found = _UFUNC_OPS[ufunc] = (_ops.elementwise_op(name), name)
    return call(found[0], ufunc, inputs, kwargs, found[1])


class LazyArray(Lazy, RecordsNumpy):
    """A deferred NumPy array (see the module docstring)."""

    __slots__ = ()

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape (no computation)."""
        return self._node.meta.shape

    @property
    def dtype(self) -> np.dtype:
        """The dtype (no computation)."""
        return np.dtype(self._node.meta.dtype)

    @property
    def size(self) -> int:
        """Number of elements (no computation)."""
        return int(np.prod(self._node.meta.shape, dtype=np.int64))

    @property
    def itemsize(self) -> int:
        """Bytes per element."""
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        """Bytes of the array."""
        return self.size * self.dtype.itemsize

    @property
    def T(self) -> Any:
        """The transpose (recorded)."""
        return call(_views.numpy_view("numpy.ndarray.T"), lambda a: a.T, (self,), {})

    def _record_ufunc(self, ufunc: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        return _ufunc_call(ufunc, inputs, kwargs)

    def _record_function(self, func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if func is np.stack:
            axis = args[1] if len(args) > 1 else kwargs.get("axis", 0)
            return _stacked(args[0] if args else kwargs.get("arrays"), axis, func, args, kwargs)
        name = f"numpy.{func.__name__}" if func.__module__ == "numpy" else func.__qualname__
        op = _views.numpy_view(name) or _ops.elementwise_op(name)
        if op is None:
            return _forced_call(func, args, kwargs, "unsupported", name)
        return call(op, func, args, kwargs, name)

    def __getitem__(self, key: object) -> Any:
        op = _getitem_op()
        items = key if type(key) is tuple else (key,)
        if any(isinstance(i, _INDEX_ARRAYS) for i in items):
            target = self._force("data_dependent", "x[array]")
            index = tuple(
                i._force("data_dependent", "x[array]") if isinstance(i, Lazy) else i for i in items
            )
            return target[index if isinstance(key, tuple) else index[0]]
        return call(op, _getitem, (self, key), {}, "x[...]")

    def astype(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.astype`` (recorded)."""
        return self._method("astype", args, kwargs)

    def copy(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.copy`` (recorded)."""
        return self._method("copy", args, kwargs)

    def transpose(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.transpose`` (recorded)."""
        return self._method("transpose", args, kwargs)

    def reshape(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.reshape`` (recorded)."""
        return self._method("reshape", args, kwargs)

    def clip(self, *args: Any, **kwargs: Any) -> Any:
        """``ndarray.clip`` (recorded as ``numpy.clip``)."""
        return call(_ops.elementwise_op("numpy.clip"), np.clip, (self, *args), kwargs, "clip")

    def _method(self, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        op = _views.numpy_view(f"numpy.ndarray.{name}")
        return call(op, getattr(np.ndarray, name), (self, *args), kwargs, f".{name}()")

    def tolist(self) -> Any:
        """Forces."""
        return self._force("number", ".tolist()").tolist()

    def item(self, *args: Any) -> Any:
        """Forces."""
        return self._force("number", ".item()").item(*args)


_INDEX_ARRAYS = (Lazy, np.ndarray, list)
_GETITEM: list[Op] = []


def _getitem_op() -> Op:
    if not _GETITEM:
        op = _views.numpy_view("operator.getitem")
        assert op is not None
        _GETITEM.append(op)
    return _GETITEM[0]


def _getitem(target: Any, key: Any) -> Any:
    return target[key]


_UFUNCS = {
    "add": np.add, "sub": np.subtract, "mul": np.multiply, "truediv": np.divide,
    "floordiv": np.floor_divide, "mod": np.remainder, "pow": np.power,
    "and_": np.bitwise_and, "or_": np.bitwise_or, "xor": np.bitwise_xor,
    "lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal,
    "eq": np.equal, "ne": np.not_equal,
    "neg": np.negative, "pos": np.positive, "abs": np.absolute, "invert": np.invert,
}  # fmt: skip
"""The ufunc a deferred array's operator records, by the operator's name in :mod:`operator`."""

_LEFT_OUT = {
    name: "never installed on deferred arrays: `x @ y` and `x << n` raise TypeError unless the "
    "other operand is an ndarray (its reflected operator reaches __array_ufunc__); installing "
    "them would change what records"
    for name in ("matmul", "lshift", "rshift")
}


def _record_operator(
    self: LazyArray, name: str, ufunc: Callable[..., Any], args: tuple[Any, ...]
) -> Any:
    """Record the operator's ufunc (a comparison's too, as a forward operator does)."""
    other = args[1] if len(args) > 1 else None
    # ndarray's ** squares for an exponent of 2 (bool ** 2 is int8, np.power gives int64)
    squares = ufunc is np.power and args[0] is self and type(other) is int and other == 2
    if squares and np.dtype(self._node.meta.dtype) == np.bool_:
        return _ufunc_call(np.square, (self,), {})
    return _ufunc_call(ufunc, args, {})


def _inplace_method(name: str) -> Callable[[Any, Any], Any]:
    ufunc = _UFUNCS[name]  # x **= 2 records np.power, as before: only ** squares bools
    return recording_inplace(name, lambda self, other: _ufunc_call(ufunc, (self, other), {}))


install_recording_operators(
    LazyArray,
    _record_operator,
    function_of=_UFUNCS.__getitem__,
    inplace=_inplace_method,
    left_out=_LEFT_OUT,
)
KINDS["ndarray"] = LazyArray

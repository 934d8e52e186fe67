"""Batched forms of NumPy views and casts, conversions to torch, and torch tensor operations.

NumPy views (``transpose``, ``reshape``, static indexing, flips) and casts (``astype``,
``np.ascontiguousarray(x, dtype=...)``) answer their result's shape by applying the real NumPy
operation to a zero-stride dummy array of the sample's shape (no memory, NumPy's own argument
checks and errors), and run on a batch as the torch view with the batch axis in front. Negative
slice steps, which torch lacks, become a flip of the positively stepped slice.

Torch operations on a converted value (``torch.from_numpy(x).float().permute(2, 0, 1) / 255``)
follow torch's semantics: their shape comes from the same call on ``meta`` tensors, and a batch
runs them under :func:`torch.vmap`, which moves every dimension argument past the batch axis.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from codedag.backends.batched.ops import (
    DATA,
    STATIC,
    Batch,
    FunctionOp,
    Meta,
    Op,
    register_builder,
    register_op,
    registered_ops,
    torch_dtype,
    unpatched,
)
from codedag.errors import UnsupportedOperation

_REGISTERED = registered_ops()


def dummy(meta: Meta) -> np.ndarray:
    """A read-only zero-stride array of ``meta``'s shape and dtype (holds one element)."""
    base = np.zeros((), dtype=meta.dtype)
    return np.lib.stride_tricks.as_strided(base, meta.shape, (0,) * meta.ndim, writeable=False)


class _NumpyView(FunctionOp):
    """Common ground of the NumPy view, cast and conversion ops: one array input, static
    arguments."""

    family = "view"

    def slot_kind(self, key: int | str, value: object) -> str:
        return DATA if key == 0 and isinstance(value, Meta) else STATIC

    def _first(self, args: tuple[Any, ...]) -> Meta:
        if not args or not isinstance(args[0], Meta) or args[0].kind != "array":
            raise UnsupportedOperation(f"{self.name}: the first argument is not a deferred array")
        return args[0]

    def _on_dummy(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> np.ndarray:
        meta = self._first(args)
        try:
            out = self._original(dummy(meta), *args[1:], **kwargs)
        except Exception as e:  # the library refuses these arguments: it raises them eagerly
            raise UnsupportedOperation(f"{self.name}: {type(e).__name__}: {e}") from e
        if not isinstance(out, np.ndarray):
            raise UnsupportedOperation(f"{self.name} returns {type(out).__name__}")
        return out


class CastOp(_NumpyView):
    """``astype``, ``copy`` and the array constructors (``asarray``, ``ascontiguousarray``, ...)."""

    _VIEWS = frozenset(
        {"numpy.asarray", "numpy.ascontiguousarray", "numpy.asanyarray", "numpy.asfortranarray"}
    )
    _ALLOWED = frozenset({"dtype", "order", "casting", "subok", "copy"})

    def __init__(self, name: str, original: Callable[..., Any]) -> None:
        super().__init__(name, original)
        self.view = name in self._VIEWS

    def infer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Meta:
        meta = self._first(args)
        extra = set(kwargs) - self._ALLOWED
        if extra or kwargs.get("ndmin", 0):
            raise UnsupportedOperation(f"{self.name}: keyword arguments {sorted(extra)}")
        dtype = self._dtype(args, kwargs)
        if dtype is None:
            return meta
        target = np.dtype(dtype)
        casting = kwargs.get("casting", "unsafe")
        if not np.can_cast(meta.dtype, target, casting=casting):
            raise UnsupportedOperation(f"cannot cast {meta.dtype} to {target} ({casting})")
        torch_dtype(target)  # refuses dtypes torch has not
        return Meta(meta.shape, target)

    def _dtype(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if self.name.endswith(".copy"):
            return None
        if len(args) > 1:
            return args[1]
        return kwargs.get("dtype")

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        batch: Batch = args[0]
        dtype = self._dtype(tuple(args), kwargs)
        if dtype is None:
            return batch.tensor
        return batch.tensor.to(torch_dtype(np.dtype(dtype)))


class TransposeOp(_NumpyView):
    """``ndarray.transpose``, ``numpy.transpose`` and ``ndarray.T``."""

    view = True

    def infer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Meta:
        out = self._on_dummy(args, kwargs)
        return Meta(out.shape, out.dtype)

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        batch: Batch = args[0]
        ndim = batch.meta.ndim
        axes = _axes(args[1:], kwargs.get("axes"), ndim)
        return batch.tensor.permute(0, *(a + 1 for a in axes))


def _axes(rest: list[Any], axes_kw: Any, ndim: int) -> list[int]:
    if rest and len(rest) == 1 and (rest[0] is None or isinstance(rest[0], tuple | list)):
        given = rest[0]
    elif rest:
        given = rest
    else:
        given = axes_kw
    if given is None:
        return list(range(ndim))[::-1]
    return [int(a) % ndim for a in given]


class ReshapeOp(_NumpyView):
    """``ndarray.reshape`` and ``numpy.reshape`` in C order."""

    view = True

    def infer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Meta:
        meta = self._first(args)
        if kwargs.get("order", "C") != "C":
            raise UnsupportedOperation(f"{self.name}: only order='C' runs batched")
        shape = _new_shape(meta, args[1:], kwargs)
        return Meta(shape, meta.dtype)

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        batch: Batch = args[0]
        shape = _new_shape(batch.meta, tuple(args[1:]), kwargs)
        return batch.tensor.reshape(n, *shape)


def _new_shape(meta: Meta, rest: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[int, ...]:
    given: Any = rest[0] if len(rest) == 1 else rest
    if not rest:
        given = kwargs.get("shape", kwargs.get("newshape"))
    if isinstance(given, int | np.integer):
        given = (given,)
    try:
        dims = [int(d) for d in given]
    except TypeError as e:
        raise UnsupportedOperation(f"reshape to {given!r}") from e
    size = int(np.prod(meta.shape, dtype=np.int64))
    unknown = [i for i, d in enumerate(dims) if d == -1]
    known = int(np.prod([d for d in dims if d != -1], dtype=np.int64))
    if len(unknown) > 1 or any(d < -1 for d in dims):
        raise UnsupportedOperation(f"reshape to {tuple(dims)}")
    if unknown:
        if known == 0 or size % known:
            raise UnsupportedOperation(f"cannot reshape {meta.shape} to {tuple(dims)}")
        dims[unknown[0]] = size // known
    if int(np.prod(dims, dtype=np.int64)) != size:
        raise UnsupportedOperation(f"cannot reshape {meta.shape} to {tuple(dims)}")
    return tuple(dims)


class IndexOp(_NumpyView):
    """Static indexing (``x[10:20, ::-1]``, ``x[..., None]``, ``x[0]``) and the flips
    (``numpy.flip``, ``numpy.fliplr``, ``numpy.flipud``), which are indexing too."""

    view = True

    def infer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Meta:
        if self.name != "operator.getitem":  # a flip: NumPy's own checks (an axis out of range)
            out = self._on_dummy(args, kwargs)
            return Meta(out.shape, out.dtype)
        meta = self._first(args)
        index = self._index(meta, tuple(args), kwargs)
        try:
            out = dummy(meta)[index]
        except Exception as e:
            raise UnsupportedOperation(f"index {index!r}: {type(e).__name__}: {e}") from e
        return Meta(out.shape, out.dtype)

    def _index(self, meta: Meta, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
        if self.name == "numpy.fliplr":
            if meta.ndim < 2:
                raise UnsupportedOperation("fliplr needs 2 or more dimensions")
            return (slice(None), slice(None, None, -1))
        if self.name == "numpy.flipud":
            if meta.ndim < 1:
                raise UnsupportedOperation("flipud needs 1 or more dimensions")
            return (slice(None, None, -1),)
        if self.name == "numpy.flip":
            axis = args[1] if len(args) > 1 else kwargs.get("axis")
            axes = range(meta.ndim) if axis is None else np.atleast_1d(axis).tolist()
            index = [slice(None)] * meta.ndim
            for a in axes:
                index[int(a) % max(meta.ndim, 1)] = slice(None, None, -1)
            return tuple(index)
        key = args[1]
        key = key if isinstance(key, tuple) else (key,)
        if not all(_static_item(k) for k in key):
            raise UnsupportedOperation("the index depends on data (arrays, masks)")
        return key

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        batch: Batch = args[0]
        index = self._index(batch.meta, tuple(args), kwargs)
        return torch_index(batch.tensor, index, batch.meta.shape)


def _static_item(item: object) -> bool:
    if item is None or item is Ellipsis:
        return True
    if isinstance(item, slice):
        return all(
            v is None or isinstance(v, int | np.integer) for v in (item.start, item.stop, item.step)
        )
    return isinstance(item, int | np.integer) and not isinstance(item, bool)


def torch_index(x: torch.Tensor, index: tuple[Any, ...], shape: tuple[int, ...]) -> torch.Tensor:
    """``sample[index]`` for every sample of ``x`` (``(n, *shape)``), negative steps included."""
    if sum(1 for i in index if i is Ellipsis) > 1:
        raise UnsupportedOperation("more than one Ellipsis")
    used = sum(1 for i in index if i is not None and i is not Ellipsis)
    items: list[Any] = []
    for item in index:
        if item is Ellipsis:
            items.extend([slice(None)] * (len(shape) - used))
        else:
            items.append(item)
    key: list[Any] = [slice(None)]
    flips: list[int] = []
    dim = 0  # the sample's dimension the next item indexes
    out_dim = 1  # the result's dimension it produces (after the batch axis)
    for item in items:
        if item is None:
            key.append(None)
            out_dim += 1
            continue
        size = shape[dim]
        dim += 1
        if isinstance(item, slice):
            start, stop, step = item.indices(size)
            if step > 0:
                key.append(slice(start, stop, step))
            else:
                count = len(range(start, stop, step))
                if count == 0:
                    key.append(slice(0, 0))
                else:
                    last = start + step * (count - 1)
                    key.append(slice(last, start + 1, -step))
                    flips.append(out_dim)
            out_dim += 1
        else:
            key.append(int(item))
    result = x[tuple(key)]
    return result.flip(flips) if flips else result


# -- conversions to torch and tensor operations ----------------------------------------------


class ToTensorOp(_NumpyView):
    """``torch.from_numpy``, ``torch.as_tensor``, ``torch.tensor`` of a deferred array."""

    result = "tensor"

    def __init__(self, name: str, original: Callable[..., Any]) -> None:
        super().__init__(name, original)
        self.view = name != "torch.tensor"

    def _dtype(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> torch.dtype | None:
        if self.name == "torch.from_numpy":
            return None
        dtype = args[1] if len(args) > 1 else kwargs.get("dtype")
        if dtype is not None and not isinstance(dtype, torch.dtype):
            raise UnsupportedOperation(f"dtype {dtype!r} is not a torch dtype")
        return dtype

    def infer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Meta:
        if not args or not isinstance(args[0], Meta) or args[0].kind != "array":
            raise UnsupportedOperation(f"{self.name}: the argument is not a deferred array")
        if self.name == "torch.from_numpy" and (len(args) > 1 or kwargs):
            raise UnsupportedOperation("torch.from_numpy takes one argument")
        device = kwargs.get("device", args[2] if len(args) > 2 else None)
        if device is not None and torch.device(device).type != "cpu":
            raise UnsupportedOperation(f"{self.name} onto {device}")
        extra = set(kwargs) - {"dtype", "device", "requires_grad", "pin_memory"}
        if extra or kwargs.get("requires_grad") or kwargs.get("pin_memory"):
            raise UnsupportedOperation(f"{self.name}: {sorted(kwargs)}")
        meta: Meta = args[0]
        dtype = self._dtype(args, kwargs) or torch_dtype(meta.dtype)
        return Meta(meta.shape, dtype, "tensor")

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        batch: Batch = args[0]
        dtype = self._dtype(tuple(args), kwargs)
        return batch.tensor if dtype is None else batch.tensor.to(dtype)


class TorchOp(FunctionOp):
    """A torch function or ``Tensor`` method applied to a deferred tensor (torch semantics)."""

    family = "view"
    result = "tensor"

    def __init__(self, name: str, function: Callable[..., Any], view: bool = False) -> None:
        super().__init__(name, function)
        self.function = function
        self.view = view

    def concrete_data(self, key: int | str, value: object) -> bool:
        """Tensors of more than 4 KiB."""
        return isinstance(value, torch.Tensor) and value.numel() * value.element_size() > 4096

    def infer(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Meta:
        """The shape from ``meta`` tensors; the dtype, and whether torch refuses the call, from
        the same call on CPU tensors of one element per dimension (meta kernels skip checks the
        CPU kernels make: ``bool - 2.5``, ``~float``, ``uint8 ** -1`` raise on the CPU only, and
        ``bool ** True`` is bool there, int64 on ``meta``)."""
        shape = self._probe(_meta_tensor, args, kwargs).shape
        dtype = self._probe(_tiny_tensor, args, kwargs).dtype
        return Meta(tuple(shape), dtype, "tensor")

    def sample_refusal(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str | None:
        """Where a concrete integer or bool tensor argument holds a zero (a divisor, for all
        the signature knows: it keys tensors by shape and dtype), the call on those very values
        and the deferred inputs' stand-ins: torch's CPU kernels refuse integer division by
        zero."""
        if not any(_has_integer_zero(v) for v in (*args, *kwargs.values())):
            return None
        probe = [_tiny_tensor(a) if type(a) is Meta else a for a in args]
        kw = {k: _tiny_tensor(v) if type(v) is Meta else v for k, v in kwargs.items()}
        try:
            self.function(*probe, **kw)
        except Exception as e:
            return f"{self.name}: {type(e).__name__}: {e}"
        return None

    def _probe(
        self, tensor: Callable[[object], Any], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> torch.Tensor:
        probe = [tensor(a) for a in args]
        kw = {k: tensor(v) for k, v in kwargs.items()}
        try:
            out = self.function(*probe, **kw)
        except Exception as e:
            raise UnsupportedOperation(f"{self.name}: {type(e).__name__}: {e}") from e
        if not isinstance(out, torch.Tensor):
            raise UnsupportedOperation(f"{self.name} returns {type(out).__name__}")
        return out

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        positions = [i for i, a in enumerate(args) if isinstance(a, Batch) and not a.shared]
        values = [a.tensor if isinstance(a, Batch) else _to_device(a, device) for a in args]
        kw = {k: _to_device(v, device) for k, v in kwargs.items()}
        if not positions:
            raise UnsupportedOperation(f"{self.name}: no per-sample tensor")
        function = self.function

        def one(*batched: torch.Tensor) -> torch.Tensor:
            call = list(values)
            for position, value in zip(positions, batched):
                call[position] = value
            return function(*call, **kw)

        return torch.vmap(one)(*(values[i] for i in positions))


def _meta_tensor(value: object) -> Any:
    if isinstance(value, Meta):
        return torch.empty(value.shape, dtype=value.torch_dtype, device="meta")
    if isinstance(value, torch.Tensor):
        return torch.empty(value.shape, dtype=value.dtype, device="meta")
    return value


def _tiny_tensor(value: object) -> Any:
    """A CPU tensor of ones standing for a deferred or concrete tensor: its dtype and rank, at
    most one element per dimension (it broadcasts as the full one does)."""
    if isinstance(value, Meta | torch.Tensor):
        dtype = value.torch_dtype if isinstance(value, Meta) else value.dtype
        return torch.ones(tuple(min(size, 1) for size in value.shape), dtype=dtype)
    return value


def _has_integer_zero(value: object) -> bool:
    return (
        isinstance(value, torch.Tensor)
        and not (value.is_floating_point() or value.is_complex())
        and bool((value == 0).any())
    )


def _to_device(value: object, device: torch.device) -> Any:
    if isinstance(value, torch.Tensor):
        return value.to(device)
    return value


# Torch functions and Tensor methods a deferred tensor records (others force it).
TENSOR_METHODS: dict[str, bool] = {  # name -> whether the result may be a view
    "float": False,
    "double": False,
    "half": False,
    "int": False,
    "long": False,
    "short": False,
    "byte": False,
    "char": False,
    "to": False,
    "type": False,
    "clone": False,
    "contiguous": True,
    "permute": True,
    "unsqueeze": True,
    "squeeze": True,
    "transpose": True,
    "flip": False,
    "movedim": True,
    "add": False,
    "sub": False,
    "mul": False,
    "div": False,
    "true_divide": False,
    "clamp": False,
    "clip": False,
    "neg": False,
    "abs": False,
}
_BINARY_OPERATORS: dict[str, Callable[..., Any]] = {  # __name__ and its reflection __rname__
    "add": torch.add,
    "sub": torch.sub,
    "mul": torch.mul,
    "truediv": torch.true_divide,
    "floordiv": torch.floor_divide,
    "mod": torch.remainder,
    "pow": torch.pow,
    "and": torch.bitwise_and,
    "or": torch.bitwise_or,
    "xor": torch.bitwise_xor,
}


def _reflected(function: Callable[..., Any]) -> Callable[..., Any]:
    return lambda a, b: function(b, a)


TORCH_OPERATORS: dict[str, Callable[..., Any]] = {
    **{f"__{name}__": function for name, function in _BINARY_OPERATORS.items()},
    **{f"__r{name}__": _reflected(function) for name, function in _BINARY_OPERATORS.items()},
    "__neg__": torch.neg,
    "__pos__": torch.positive,
    "__abs__": torch.abs,
    "__invert__": torch.bitwise_not,
    "__lt__": torch.lt,
    "__le__": torch.le,
    "__gt__": torch.gt,
    "__ge__": torch.ge,
    "__eq__": torch.eq,
    "__ne__": torch.ne,
}


def tensor_method(name: str) -> TorchOp | None:
    """The op of ``Tensor.<name>`` (``None`` when a deferred tensor does not record it)."""
    if name not in TENSOR_METHODS:
        return None
    full = f"torch.Tensor.{name}"
    return _REGISTERED.get(("view", full)) or register_op(  # type: ignore[return-value]
        TorchOp(full, getattr(torch.Tensor, name), TENSOR_METHODS[name])
    )


def torch_operator(name: str) -> TorchOp | None:
    """The op of a Python operator on a deferred tensor."""
    function = TORCH_OPERATORS.get(name)
    if function is None:
        return None
    full = f"torch.Tensor.{name}"
    return _REGISTERED.get(("view", full)) or register_op(TorchOp(full, function))  # type: ignore[return-value]


def torch_function(function: Callable[..., Any]) -> TorchOp | None:
    """The op of a ``torch.<name>`` function reached through ``__torch_function__``."""
    name = getattr(function, "__name__", "")
    if getattr(torch, name, None) is not function or name not in TENSOR_METHODS:
        return None
    full = f"torch.{name}"
    return _REGISTERED.get(("view", full)) or register_op(  # type: ignore[return-value]
        TorchOp(full, function, TENSOR_METHODS[name])
    )


# -- the op table --------------------------------------------------------------------------------

NUMPY_VIEWS: dict[str, type[_NumpyView]] = {
    "numpy.ndarray.astype": CastOp,
    "numpy.ndarray.copy": CastOp,
    "numpy.copy": CastOp,
    "numpy.asarray": CastOp,
    "numpy.asanyarray": CastOp,
    "numpy.ascontiguousarray": CastOp,
    "numpy.array": CastOp,
    "numpy.ndarray.transpose": TransposeOp,
    "numpy.transpose": TransposeOp,
    "numpy.ndarray.T": TransposeOp,
    "numpy.ndarray.reshape": ReshapeOp,
    "numpy.reshape": ReshapeOp,
    "operator.getitem": IndexOp,
    "numpy.flip": IndexOp,
    "numpy.fliplr": IndexOp,
    "numpy.flipud": IndexOp,
}
TO_TENSOR = ("torch.from_numpy", "torch.as_tensor", "torch.tensor")


def numpy_view(name: str) -> Op | None:
    """The op of a NumPy view, cast or constructor (``None`` when not recorded)."""
    cls = NUMPY_VIEWS.get(name)
    if cls is None:
        return None
    return _REGISTERED.get(("view", name)) or register_op(cls(name, _numpy_original(name)))


def _numpy_original(name: str) -> Callable[..., Any]:
    if name == "operator.getitem":
        return operator.getitem
    if name == "numpy.ndarray.T":
        return lambda a: a.T
    if name.startswith("numpy.ndarray."):
        return getattr(np.ndarray, name.rsplit(".", 1)[1])
    return unpatched(name)


def to_tensor_op(name: str) -> Op | None:
    """The op of a conversion of a deferred array to a tensor."""
    if name not in TO_TENSOR:
        return None
    return _REGISTERED.get(("view", name)) or register_op(ToTensorOp(name, unpatched(name)))


def view_op(key: tuple[Any, ...]) -> Op | None:
    """Rebuild a view, cast or torch op from its key (another process sent it)."""
    name = key[1]
    if name in NUMPY_VIEWS:
        return numpy_view(name)
    if name in TO_TENSOR:
        return to_tensor_op(name)
    if name.startswith("torch.Tensor."):
        method = name.rsplit(".", 1)[1]
        return tensor_method(method) or torch_operator(method)
    if name.startswith("torch."):
        function = getattr(torch, name.rsplit(".", 1)[1], None)
        return torch_function(function) if function is not None else None
    return None


register_builder(view_op)

__all__ = [
    "CastOp",
    "IndexOp",
    "ReshapeOp",
    "ToTensorOp",
    "TorchOp",
    "TransposeOp",
    "dummy",
    "numpy_view",
    "tensor_method",
    "to_tensor_op",
    "torch_function",
    "torch_index",
    "torch_operator",
]

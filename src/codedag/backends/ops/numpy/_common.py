"""Helpers shared by the NumPy backends: dtype maps, NumPy's own type promotion, axis handling.

Result dtypes are never guessed: :func:`probe_dtype` calls the real NumPy function on 0-d arrays of
the argument dtypes (Python scalars passed as they are, so NEP 50 weak-scalar rules, loop selection
such as ``sqrt(uint8) -> float16`` and overflow errors all come from NumPy itself). The torch side
then casts its inputs to that dtype and computes, so integer results wrap exactly as NumPy's do.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, TypeVar

import numpy as np
import torch

from codedag.errors import UnsupportedOperation

F = TypeVar("F", bound=Callable[..., Any])

TORCH_OF_NUMPY: dict[np.dtype, torch.dtype] = {
    np.dtype(np.bool_): torch.bool,
    np.dtype(np.uint8): torch.uint8,
    np.dtype(np.int8): torch.int8,
    np.dtype(np.int16): torch.int16,
    np.dtype(np.int32): torch.int32,
    np.dtype(np.int64): torch.int64,
    np.dtype(np.uint16): torch.uint16,
    np.dtype(np.uint32): torch.uint32,
    np.dtype(np.uint64): torch.uint64,
    np.dtype(np.float16): torch.float16,
    np.dtype(np.float32): torch.float32,
    np.dtype(np.float64): torch.float64,
    np.dtype(np.complex64): torch.complex64,
    np.dtype(np.complex128): torch.complex128,
}
NUMPY_OF_TORCH: dict[torch.dtype, np.dtype] = {v: k for k, v in TORCH_OF_NUMPY.items()}

# torch stores uint16/32/64 and converts them, but has no arithmetic kernels for them.
STORAGE_ONLY = frozenset({torch.uint16, torch.uint32, torch.uint64})


def torch_dtype(dtype: Any) -> torch.dtype:
    """Map what ``numpy.dtype()`` accepts (``"f4"``, ``np.uint8``, ``float``) to a torch dtype."""
    try:
        npd = np.dtype(dtype)
    except TypeError as e:
        raise UnsupportedOperation(f"dtype {dtype!r} is not a NumPy dtype") from e
    td = TORCH_OF_NUMPY.get(npd)
    if td is None:
        raise UnsupportedOperation(
            f"dtype {npd} has no torch equivalent; expected one of "
            f"{sorted(str(d) for d in TORCH_OF_NUMPY)}"
        )
    return td


def numpy_dtype(t: torch.Tensor) -> np.dtype:
    """The NumPy dtype of a tensor."""
    try:
        return NUMPY_OF_TORCH[t.dtype]
    except KeyError as e:
        raise UnsupportedOperation(f"tensor dtype {t.dtype} has no NumPy equivalent") from e


_COMPUTED = frozenset(NUMPY_OF_TORCH) - STORAGE_ONLY


def check_computable(*tensors: Any) -> None:
    """Raise UnsupportedOperation for tensors whose dtype torch cannot compute with."""
    for t in tensors:
        if isinstance(t, torch.Tensor) and t.dtype not in _COMPUTED:
            raise UnsupportedOperation(
                f"received a {t.dtype} tensor; torch has no kernels for it (expected bool, "
                "int8..int64, uint8, float16/32/64 or complex)"
            )


def computable_tensor(a: object) -> torch.Tensor:
    """``a`` when it is a tensor of a dtype torch computes with; else UnsupportedOperation."""
    if not isinstance(a, torch.Tensor):
        raise UnsupportedOperation(f"received {type(a).__name__}; expected a tensor")
    check_computable(a)
    return a


def named(backend: F, name: str, doc: str) -> F:
    """``backend`` (a function made by a factory) with the ``__name__`` and ``__doc__`` given."""
    backend.__name__ = name
    backend.__doc__ = doc
    return backend


def as_probe(x: object) -> Any:
    """A stand-in for ``x`` in a NumPy dtype probe: a 0-d array of an array's or a tensor's
    dtype, else ``x`` (lists and tuples item by item)."""
    if isinstance(x, np.ndarray):
        return np.ones((), dtype=x.dtype)
    if isinstance(x, torch.Tensor):
        return np.ones((), dtype=numpy_dtype(x))
    if isinstance(x, (list, tuple)):
        return type(x)(as_probe(v) for v in x)
    return x


class _Unkeyed(Exception):
    """An argument whose probe stand-in has no hashable description."""


def _probe_key(x: Any) -> Any:
    """What a probe on ``as_probe(x)`` depends on: the dtype of arrays and tensors, the type of
    Python floats and complex numbers (NEP 50: weak, their value never changes NumPy's answer),
    the value of Python ints (one out of an array's range is an error), strings, NumPy scalars,
    dtypes and callables (types, functions). Any other value may change what NumPy makes of it
    (an object with ``__array__``): its probe is not remembered."""
    kind = type(x)
    if kind is np.ndarray:
        return x.dtype
    if kind is torch.Tensor:
        return x.dtype  # a torch dtype: never equal to a NumPy one
    if kind is float or kind is complex:
        return kind
    if kind is int or kind is bool or kind is str or x is None:
        return (kind, x)
    if kind is list or kind is tuple:
        return (kind, *map(_probe_key, x))
    if (isinstance(x, _BY_VALUE) or callable(x)) and not isinstance(x, _CONTAINERS):
        try:
            hash(x)
        except TypeError:
            raise _Unkeyed from None
        return (kind, x)
    raise _Unkeyed


_CONTAINERS = (np.ndarray, torch.Tensor, list, tuple)
# Immutable values whose probe answer follows from their value (functions too: any callable).
_BY_VALUE = (int, str, np.generic, np.dtype)
_ANSWERS: dict[Any, np.dtype | str] = {}
_MAX_ANSWERS = 4096


def numpy_answer(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> np.dtype:
    """The dtype NumPy's ``fn`` returns (or is, for ``numpy.result_type``) for these arguments,
    arrays and tensors as 0-d probes of their dtype, remembered per :func:`_probe_key` of every
    argument (a probe costs a NumPy call on fresh 0-d arrays; a remembered answer, one dictionary
    lookup).

    Raises:
        UnsupportedOperation: NumPy raises on the probes (its message).
    """
    try:
        key: Any = (fn, *map(_probe_key, args))
        if kwargs:
            key += tuple((k, _probe_key(v)) for k, v in kwargs.items())
        answer = _ANSWERS.get(key)
    except _Unkeyed:
        key, answer = None, None
    if answer is None:
        try:
            with np.errstate(all="ignore"):
                out = fn(*map(as_probe, args), **{k: as_probe(v) for k, v in kwargs.items()})
            answer = out if isinstance(out, np.dtype) else np.asarray(out).dtype
        except Exception as e:  # OverflowError, casting rules, unknown arguments
            answer = str(e)
        if key is not None:
            if len(_ANSWERS) >= _MAX_ANSWERS:
                _ANSWERS.clear()
            _ANSWERS[key] = answer
    if isinstance(answer, str):
        raise UnsupportedOperation(answer)
    return answer


def on_one_element(probe: np.ndarray, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn`` on a 0-d probe made one element long (reductions refuse 0-d arrays). A probe of a
    named function, where a lambda made per call would never be found among remembered answers.
    """
    return fn(probe.reshape(1), *args, **kwargs)


def probe_dtype(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> np.dtype:
    """Return the dtype NumPy's ``fn`` gives for these arguments (tensors as 0-d arrays)."""
    try:
        return numpy_answer(fn, args, kwargs)
    except UnsupportedOperation as e:  # NumPy refuses (overflow, casting rules): so does this
        raise UnsupportedOperation(f"NumPy rejects these argument types: {e}") from None


def result_type(*args: Any) -> np.dtype:
    """``numpy.result_type`` of tensors and scalars (NEP 50: Python scalars are weak)."""
    try:
        return numpy_answer(np.result_type, args, {})
    except UnsupportedOperation as e:
        raise UnsupportedOperation(f"no common NumPy dtype for these arguments: {e}") from None


def cast(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``tensor.to(dtype)``, without torch's argument parsing (about 1 us) when it has it."""
    return tensor if tensor.dtype is dtype else tensor.to(dtype)


def first_device(*args: Any) -> torch.device:
    """Device of the first tensor among ``args`` (CPU when there is none)."""
    for a in args:
        if isinstance(a, torch.Tensor):
            return a.device
        if isinstance(a, (list, tuple)):
            for v in a:
                if isinstance(v, torch.Tensor):
                    return v.device
    return torch.device("cpu")


def norm_axes(axis: int | Sequence[int] | None, ndim: int) -> tuple[int, ...] | None:
    """Normalize ``axis`` (int, tuple, negative values) against ``ndim``; None stays None."""
    if axis is None:
        return None
    axes = (axis,) if isinstance(axis, int | np.integer) else tuple(axis)
    out = []
    for a in axes:
        a = int(a)
        if not -ndim <= a < max(ndim, 1):
            raise UnsupportedOperation(f"axis {a} is out of bounds for an array of {ndim} dims")
        out.append(a % max(ndim, 1))
    if len(set(out)) != len(out):
        raise UnsupportedOperation(f"repeated axis in {axis!r}")
    return tuple(out)


def require_default(name: str, value: object, default: object) -> None:
    """Raise UnsupportedOperation unless a parameter has its default (``out=``, ``where=``...)."""
    if value is not default and not (default is True and value is True):
        raise UnsupportedOperation(f"{name}={value!r} is not supported; expected {default!r}")


def shape_tuple(size: int | Iterable[int] | None) -> tuple[int, ...]:
    """A NumPy ``size``/``shape`` argument as a tuple."""
    if size is None:
        return ()
    if isinstance(size, int | np.integer):
        return (int(size),)
    return tuple(int(s) for s in size)

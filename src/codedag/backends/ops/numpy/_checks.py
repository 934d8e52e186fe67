"""Declared checks of the NumPy ops: what each backend does not reproduce, decided on the call's own
arguments before anything is converted (NumPy arrays, Python scalars), so such calls run NumPy.

Common rules: an array argument is needed (a call on Python scalars or lists stays in NumPy: there
is nothing to move); dtypes torch computes with (uint16/32/64 are storage only); ``where=`` masks,
``initial=`` and ``order`` other than K/C/A are refused; argument types NumPy itself refuses are
found by asking NumPy on 0-d probes, and incompatible shapes by ``numpy.broadcast_shapes``, so the
original raises its own error. Each family adds what its backends leave out.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from codedag.backends.contract import MAX_OUTPUT_VALUES
from codedag.backends.device_values import CONVERTIBLE, accepted_dtypes
from codedag.backends.ops.numpy._common import norm_axes, numpy_answer
from codedag.errors import UnsupportedOperation

# Convertible dtypes torch also computes with (uint16/32/64 are storage only).
COMPUTABLE = CONVERTIBLE - {"uint16", "uint32", "uint64"}
_COMPUTABLE_DTYPES = accepted_dtypes(COMPUTABLE)
_SCALARS = (bool, int, float, complex, np.bool_, np.number)
_COMPLEX = (complex, np.complexfloating)


def declared(fn: Callable[..., None]) -> Callable[..., str | None]:
    """A check written with ``refuse``: the reason it raises, or ``None``."""

    @functools.wraps(fn)
    def check(*args: Any, **kwargs: Any) -> str | None:
        try:
            fn(*args, **kwargs)
        except UnsupportedOperation as e:
            return str(e)
        return None

    return check


def refuse(condition: object, reason: str, *details: Any) -> None:
    """Raise the declared reason when ``condition`` holds; ``details`` fill the reason's ``{}``
    fields then only (formatting a dtype costs microseconds, a passing check pays nothing)."""
    if condition:
        raise UnsupportedOperation(reason.format(*details) if details else reason)


# A broadcast view repeating more than this many bytes stays in NumPy for the ops that would copy it.
REPEATED_VIEW_BYTES = 1 << 20


def no_repeated_view(a: np.ndarray, name: str) -> None:
    """Refuse a broadcast view (stride-0 axes) that ``name``'s backend would copy whole.

    Arguments reach backends compact (each repeated value once); ops that flatten, sort or
    accumulate copy every repeat first, so a view of a few values could become gigabytes.
    """
    if a.nbytes <= REPEATED_VIEW_BYTES or 0 not in a.strides:
        return
    repeats = any(n > 1 and s == 0 for n, s in zip(a.shape, a.strides, strict=True))
    refuse(repeats, "{} of a broadcast view would copy its {} repeated bytes", name, a.nbytes)


def computable(dtype: np.dtype) -> bool:
    """Whether torch computes with ``dtype`` (its name in :data:`COMPUTABLE`; a set lookup for
    the native dtypes, where ``dtype.name`` is computed in Python on every access)."""
    return dtype in _COMPUTABLE_DTYPES or dtype.name in COMPUTABLE


def arrays(*values: Any) -> list[np.ndarray]:
    """The NumPy arrays among ``values`` (one level of lists and tuples)."""
    out = []
    for v in values:
        if isinstance(v, np.ndarray):
            out.append(v)
        elif isinstance(v, list | tuple):
            out.extend(x for x in v if isinstance(x, np.ndarray))
    return out


def operands(*values: Any, real: bool = False, name: str = "") -> None:
    """Every operand an array of a computable dtype or a scalar, at least one array."""
    refuse(not arrays(*values), "no array argument: nothing to run on a device")
    for v in values:
        if isinstance(v, np.ndarray):
            refuse(not computable(v.dtype), "dtype {}: torch does not compute it", v.dtype)
            refuse(real and v.dtype.kind == "c", "{} of complex arrays is not reproduced", name)
        else:
            refuse(not isinstance(v, _SCALARS), "a {} operand stays in NumPy", type(v).__name__)
            refuse(real and isinstance(v, _COMPLEX), "complex {}", name)


def probe(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> np.dtype:
    """NumPy's own answer for these argument types (arrays as 0-d probes); refuses where NumPy
    raises, with NumPy's message."""
    try:
        return numpy_answer(fn, args, kwargs)
    except UnsupportedOperation as e:
        raise UnsupportedOperation(f"NumPy refuses these argument types: {e}") from None


def broadcast(*values: Any) -> None:
    """Refuse operands NumPy cannot broadcast together (it raises ValueError), and results past
    :data:`~codedag.backends.contract.MAX_OUTPUT_VALUES`."""
    shapes = [v.shape for v in values if isinstance(v, np.ndarray)]
    if all(shape == shapes[0] for shape in shapes[1:]):  # the usual case: nothing to broadcast
        return
    try:
        result = np.broadcast_shapes(*shapes)
    except ValueError as e:
        raise UnsupportedOperation(f"shapes {shapes} do not broadcast") from e
    output_values(result)


def output_values(shape: Sequence[int]) -> None:
    """Refuse a result of ``shape`` past :data:`~codedag.backends.contract.MAX_OUTPUT_VALUES`
    (Python integers: no overflow): NumPy allocates it once, or raises at once."""
    values = math.prod(int(n) for n in shape)
    refuse(values > MAX_OUTPUT_VALUES, "a result of {} values stays in NumPy", values)


def ufunc_kwargs(where: object, order: object, casting: object = "same_kind") -> None:
    """``where=`` masks and exotic orders stay in NumPy."""
    refuse(where is not True, "where= masks are not reproduced")
    refuse(order not in ("K", "C", "A"), f"order={order!r} is not reproduced")


def axes(a: np.ndarray, axis: Any, single: bool = False) -> tuple[int, ...] | None:
    """Normalized axes of ``a`` (refused where NumPy raises)."""
    if single:
        refuse(axis is not None and not isinstance(axis, numbers.Integral), f"axis={axis!r}")
    try:
        return norm_axes(axis, a.ndim)
    except (UnsupportedOperation, TypeError) as e:
        raise UnsupportedOperation(f"axis={axis!r} for an array of {a.ndim} dims") from e


def reduced_sizes(a: np.ndarray, dims: Sequence[int] | None) -> list[int]:
    """Lengths of the axes a reduction runs over."""
    return list(a.shape) if dims is None else [a.shape[d] for d in dims]

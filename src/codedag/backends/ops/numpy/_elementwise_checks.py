"""Declared checks of the elementwise NumPy ops of :mod:`.elementwise`: what each backend does not
reproduce, decided on the call's own arguments before anything is converted."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from codedag.backends.contract import Check
from codedag.backends.ops.numpy._checks import (
    broadcast,
    computable,
    declared,
    operands,
    probe,
    refuse,
    ufunc_kwargs,
)
from codedag.backends.ops.numpy._ufuncs import PREDICATE

# Functions whose torch kernels do not take complex values (or order them unlike NumPy).
_REAL_ONLY = frozenset(
    [
        "maximum",
        "minimum",
        "fmax",
        "fmin",
        "floor_divide",
        "remainder",
        "fmod",
        "arctan2",
        "hypot",
        "greater",
        "greater_equal",
        "less",
        "less_equal",
        "sign",
        "floor",
        "ceil",
        "trunc",
        "rint",
        "signbit",
        "deg2rad",
        "rad2deg",
    ]
)


def ufunc_check(name: str, nin: int) -> Check:
    """The declared check of the ufunc ``numpy.<name>`` of ``nin`` operands."""
    ufunc = getattr(np, name)
    real = name in _REAL_ONLY

    @declared
    def check(*args: Any, **kwargs: Any) -> None:
        refuse(len(args) != nin, f"numpy.{name} takes {nin} positional operands here")
        where, order = kwargs.get("where", True), kwargs.get("order", "K")
        ufunc_kwargs(where, order)
        unknown = set(kwargs) - _UFUNC_KWARGS
        refuse(unknown, "arguments {}", sorted(unknown))
        operands(*args, real=real, name=f"numpy.{name}")
        broadcast(*args)
        kw = {k: kwargs[k] for k in ("casting", "dtype") if kwargs.get(k) is not None}
        result = probe(ufunc, *args, **kw)
        refuse(not computable(result), "a {} result: torch does not compute it", result)
        integer = result.kind in "iu"
        refuse(name == "reciprocal" and integer, "integer reciprocal truncates in NumPy")
        if name == "power" and integer:
            exponent = np.asarray(args[1])
            refuse((exponent < 0).any(), "integers to negative integer powers: NumPy raises")
        refuse(nin == 1 and result == np.bool_ and name not in _BOOL_OK, f"numpy.{name} of bool")

    return check


_UFUNC_KWARGS = frozenset({"out", "where", "casting", "order", "dtype", "subok"})
_BOOL_OK = frozenset(
    {"absolute", "fabs", "square", "positive", "floor", "ceil", "trunc", "rint"} | set(PREDICATE)
)


@declared
def check_clip(
    a: object,
    a_min: object = None,
    a_max: object = None,
    out: object = None,
    *,
    min: object = None,
    max: object = None,
    **kwargs: Any,
) -> None:
    """An array (not a scalar) of a real dtype, at least one bound, bounds NumPy takes."""
    refuse(not isinstance(a, np.ndarray), f"a {type(a).__name__} first argument stays in NumPy")
    refuse(bool(kwargs), f"clip arguments {sorted(kwargs)}")
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    refuse(lo is None and hi is None, "clip without bounds")
    bounds = [v for v in (lo, hi) if v is not None]
    operands(a, *bounds, real=True, name="numpy.clip")
    broadcast(a, *bounds)
    result = probe(np.clip, a, lo, hi)
    refuse(not computable(result), "a {} result", result)


@declared
def check_where(condition: Any, x: Any = None, y: Any = None, /) -> None:
    """An array condition with both x and y (or neither)."""
    refuse(not isinstance(condition, np.ndarray), "a scalar condition stays in NumPy")
    refuse((x is None) != (y is None), "numpy.where needs both x and y, or neither")
    if x is None:
        refuse(not computable(condition.dtype), "dtype {}", condition.dtype)
        refuse(condition.ndim == 0, "nonzero of a 0-d array: NumPy raises")
        return
    operands(condition, x, y)
    broadcast(condition, x, y)
    result = probe(np.where, True, x, y)
    refuse(not computable(result), "a {} result", result)


@declared
def check_round(a: Any, decimals: Any = 0, out: Any = None) -> None:
    """A real array (scalars stay in NumPy), integer decimals (>= 0 for integer arrays)."""
    refuse(not isinstance(a, np.ndarray), f"a {type(a).__name__} stays in NumPy")
    refuse(not isinstance(decimals, numbers.Integral), f"decimals={decimals!r}")
    operands(a, real=True, name="numpy.round")
    refuse(a.dtype == np.bool_, "rounding bool arrays (NumPy returns float16)")
    refuse(a.dtype.kind in "iu" and decimals < 0, "integer rounding to negative decimals")

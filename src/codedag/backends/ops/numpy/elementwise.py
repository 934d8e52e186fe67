"""Torch backends of NumPy: elementwise math, comparisons, clip, where, round and dtype conversion.

Semantics are NumPy's, not torch's: the result dtype of every call is asked from NumPy itself on 0-d
probes (:func:`~codedag.backends.ops.numpy._common.probe_dtype`), so NEP 50 promotion holds (``uint8 +
uint8`` wraps as in NumPy, unlike cv2's saturation; ``uint8 + 1.5`` is float64; ``divide`` of
ints is float64; ``sqrt(uint8)`` is float16), and arguments NumPy rejects (``uint8_array + 300``)
raise ``UnsupportedOperation`` so the original runs and raises its own error. Inputs are cast to
that dtype and Python scalars become 0-d tensors of it before torch computes, as NumPy's loops do.

Only ``out=None`` and ``where=True`` are supported (NumPy writes ``out`` in place). Results NumPy
returns as a NumPy scalar come back as 0-d tensors: convert with ``t.cpu().numpy()[()]``.
Transcendental functions differ from NumPy's SIMD implementations by a few ulp (see TOLERANCES).
"""

from __future__ import annotations

import builtins
import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import Check, Tolerance
from codedag.backends.ops.numpy._adapter import ops_of
from codedag.backends.ops.numpy._checks import (
    broadcast,
    computable,
    declared,
    operands,
    probe,
    refuse,
    ufunc_kwargs,
)
from codedag.backends.ops.numpy._common import (
    NUMPY_OF_TORCH,
    cast,
    check_computable,
    first_device,
    probe_dtype,
    require_default,
    result_type,
    torch_dtype,
)
from codedag.errors import UnsupportedOperation

TorchFn = Callable[..., torch.Tensor]


def _operand(x: object, td: torch.dtype, device: torch.device) -> torch.Tensor:
    """``x`` cast to ``td`` as NumPy casts inputs to a loop (Python scalars included)."""
    if isinstance(x, torch.Tensor):
        return cast(x, td)
    try:
        value = np.asarray(x).astype(NUMPY_OF_TORCH[td])
    except (TypeError, ValueError) as e:
        raise UnsupportedOperation(f"cannot use {type(x).__name__} {x!r} as an operand") from e
    if value.ndim == 0:  # a fill kernel: no blocking host-to-device copy for a scalar
        return torch.full((), value.item(), dtype=td, device=device)
    return torch.as_tensor(value, device=device)


def _astype(probe: np.ndarray, dtype: Any, casting: Any) -> np.ndarray:
    return probe.astype(dtype, casting=casting)


def _require_tensor(*args: Any) -> None:
    for a in args:
        if isinstance(a, torch.Tensor):
            return
    raise UnsupportedOperation("no tensor argument: nothing to run on a device")


def _int_safe(op: TorchFn) -> TorchFn:
    """Integer division-like ops: NumPy gives 0 where the divisor is 0, torch would raise."""

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        if a.dtype.is_floating_point or a.dtype.is_complex:
            return op(a, b)
        zero = b == 0
        res = op(a, torch.where(zero, torch.ones_like(b), b))
        return torch.where(zero, torch.zeros_like(res), res)

    return run


_FAST_POWERS: dict[float, TorchFn] = {2.0: torch.square, -1.0: torch.reciprocal}
"""Exponents NumPy computes with another ufunc (``x ** 2`` is ``square(x)``, correctly rounded,
where ``pow`` of a tensor exponent may be a unit in the last place off). Not ``0.5``: NumPy's
``sqrt`` is correctly rounded and torch's float64 ``sqrt`` on the CPU is not, for some values."""


def _power(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    exact = a.dtype.is_floating_point or a.dtype.is_complex or a.dtype == torch.bool
    if not exact and bool((b < 0).any()):
        raise UnsupportedOperation("integers to negative integer powers: NumPy raises")
    # (a meta tensor has no value to read: shapes are inferred alike either way)
    if a.dtype.is_floating_point and b.numel() == 1 and b.device.type != "meta":
        fast = _FAST_POWERS.get(float(b)) if not b.dtype.is_complex else None
        if fast is not None:
            return fast(a.to(torch.result_type(a, b)))
    return torch.pow(a, b)


_ARITH: dict[str, TorchFn] = {
    "add": torch.add,
    "subtract": torch.sub,
    "multiply": torch.mul,
    "divide": torch.true_divide,
    "floor_divide": _int_safe(torch.floor_divide),
    "remainder": _int_safe(torch.remainder),
    "fmod": _int_safe(torch.fmod),
    "power": _power,
    "maximum": torch.maximum,
    "minimum": torch.minimum,
    "fmax": torch.fmax,
    "fmin": torch.fmin,
    "arctan2": torch.atan2,
    "hypot": torch.hypot,
    "bitwise_and": torch.bitwise_and,
    "bitwise_or": torch.bitwise_or,
    "bitwise_xor": torch.bitwise_xor,
}
_COMPARE: dict[str, TorchFn] = {
    "greater": torch.gt,
    "greater_equal": torch.ge,
    "less": torch.lt,
    "less_equal": torch.le,
    "equal": torch.eq,
    "not_equal": torch.ne,
    "logical_and": torch.logical_and,
    "logical_or": torch.logical_or,
    "logical_xor": torch.logical_xor,
}
_UNARY: dict[str, TorchFn] = {
    "negative": torch.neg,
    "positive": torch.clone,
    "absolute": torch.abs,
    "fabs": torch.abs,
    "sign": lambda x: torch.where(torch.isnan(x), x, torch.sign(x)),  # NumPy: sign(nan) is nan
    "sqrt": torch.sqrt,
    "square": torch.square,
    "reciprocal": torch.reciprocal,
    "exp": torch.exp,
    "exp2": torch.exp2,
    "expm1": torch.expm1,
    "log": torch.log,
    "log2": torch.log2,
    "log10": torch.log10,
    "log1p": torch.log1p,
    "sin": torch.sin,
    "cos": torch.cos,
    "tan": torch.tan,
    "arcsin": torch.asin,
    "arccos": torch.acos,
    "arctan": torch.atan,
    "sinh": torch.sinh,
    "cosh": torch.cosh,
    "tanh": torch.tanh,
    "arcsinh": torch.asinh,
    "arccosh": torch.acosh,
    "arctanh": torch.atanh,
    "deg2rad": torch.deg2rad,
    "rad2deg": torch.rad2deg,
    "floor": torch.floor,
    "ceil": torch.ceil,
    "trunc": torch.trunc,
    "rint": torch.round,
}
_PREDICATE: dict[str, TorchFn] = {
    "isnan": torch.isnan,
    "isinf": torch.isinf,
    "isfinite": torch.isfinite,
    "logical_not": torch.logical_not,
    "signbit": torch.signbit,
}
_INTEGER_IDENTITY = frozenset({"floor", "ceil", "trunc", "rint", "positive"})


def _check_ufunc_kwargs(out: object, where: object, order: str, subok: bool) -> None:
    require_default("out", out, None)
    if where is not True:
        raise UnsupportedOperation(f"where={where!r} is not supported; expected True")
    if order not in ("K", "C", "A"):
        raise UnsupportedOperation(f"order={order!r} is not supported; expected 'K', 'C' or 'A'")


def _binary(name: str, op: TorchFn) -> Callable[..., torch.Tensor]:
    ufunc = getattr(np, name)

    def backend(
        x1: object,
        x2: object,
        /,
        out: object = None,
        *,
        where: object = True,
        casting: str = "same_kind",
        order: str = "K",
        dtype: object = None,
        subok: bool = True,
    ) -> torch.Tensor:
        _check_ufunc_kwargs(out, where, order, subok)
        _require_tensor(x1, x2)
        check_computable(x1, x2)
        kw: dict[str, Any] = {"casting": casting}
        if dtype is not None:
            kw["dtype"] = dtype
        td = torch_dtype(probe_dtype(ufunc, x1, x2, **kw))
        dev = first_device(x1, x2)
        return cast(op(_operand(x1, td, dev), _operand(x2, td, dev)), td)

    backend.__name__ = name
    backend.__doc__ = f"``numpy.{name}`` with NumPy's result dtype (NEP 50 promotion)."
    return backend


def _compare(name: str, op: TorchFn) -> Callable[..., torch.Tensor]:
    ufunc = getattr(np, name)
    logical = name.startswith("logical_")

    def backend(
        x1: object,
        x2: object,
        /,
        out: object = None,
        *,
        where: object = True,
        casting: str = "same_kind",
        order: str = "K",
        dtype: object = None,
        subok: bool = True,
    ) -> torch.Tensor:
        _check_ufunc_kwargs(out, where, order, subok)
        require_default("dtype", dtype, None)
        _require_tensor(x1, x2)
        check_computable(x1, x2)
        probe_dtype(ufunc, x1, x2, casting=casting)
        dev = first_device(x1, x2)
        if logical:
            return op(_operand(x1, torch.bool, dev), _operand(x2, torch.bool, dev))
        common = result_type(x1, x2)
        td = torch_dtype(common)
        # NumPy 2 compares out-of-range Python ints exactly (uint8 > -1 is True): widen then.
        if common.kind in "iu" and any(
            isinstance(x, int) and not isinstance(x, bool) and not _fits(x, common)
            for x in (x1, x2)
        ):
            td = torch.int64
        return op(_operand(x1, td, dev), _operand(x2, td, dev))

    backend.__name__ = name
    backend.__doc__ = f"``numpy.{name}``: compares in NumPy's common dtype, returns bool."
    return backend


def _fits(value: int, dtype: np.dtype) -> bool:
    info = np.iinfo(dtype)
    return int(info.min) <= value <= int(info.max)


_WIDE_INTERMEDIATE = frozenset({"sinh", "cosh"})


def _unary(name: str, op: TorchFn, predicate: bool = False) -> Callable[..., torch.Tensor]:
    ufunc = getattr(np, name)

    def backend(
        x: Any,
        /,
        out: Any = None,
        *,
        where: Any = True,
        casting: str = "same_kind",
        order: str = "K",
        dtype: Any = None,
        subok: bool = True,
    ) -> torch.Tensor:
        _check_ufunc_kwargs(out, where, order, subok)
        _require_tensor(x)
        check_computable(x)
        kw: dict[str, Any] = {"casting": casting}
        if dtype is not None:
            kw["dtype"] = dtype
        res = probe_dtype(ufunc, x, **kw)
        if predicate:
            if x.dtype == torch.bool or not (x.dtype.is_floating_point or x.dtype.is_complex):
                if name == "logical_not":
                    return torch.logical_not(x)
                if name == "signbit":
                    return x < 0 if x.dtype != torch.bool else torch.zeros_like(x)
                fill = name == "isfinite"
                return torch.full_like(x, fill, dtype=torch.bool)
            return op(x)
        td = torch_dtype(res)
        if name in _INTEGER_IDENTITY and res.kind in "iub":
            return x.to(td).clone()
        if name == "reciprocal" and res.kind in "iu":
            raise UnsupportedOperation("integer reciprocal truncates in NumPy; not reproduced")
        if td == torch.bool:
            if name in ("absolute", "fabs", "square"):
                return x.clone()
            raise UnsupportedOperation(f"numpy.{name} on bool is not supported")
        if name in _WIDE_INTERMEDIATE and td in (torch.float16, torch.float32):
            # torch forms e**|x| in the output precision and overflows early (sinh(-89) is
            # finite in float32); NumPy does not.
            return cast(op(cast(x, torch.float64)), td)
        if x.dtype.is_complex and not td.is_complex:  # |z| of a complex: a real result
            return cast(op(x), td)
        return cast(op(cast(x, td)), td)

    backend.__name__ = name
    backend.__doc__ = f"``numpy.{name}`` with NumPy's result dtype."
    return backend


def clip(
    a: torch.Tensor,
    a_min: object = None,
    a_max: object = None,
    out: object = None,
    *,
    min: object = None,
    max: object = None,
    **kwargs: Any,
) -> torch.Tensor:
    """``numpy.clip``: NaN propagates, a lower bound above the upper gives the upper (as NumPy)."""
    require_default("out", out, None)
    if kwargs:
        raise UnsupportedOperation(f"clip keyword arguments {sorted(kwargs)} are not supported")
    lo = a_min if a_min is not None else min
    hi = a_max if a_max is not None else max
    if lo is None and hi is None:
        raise UnsupportedOperation("clip needs a_min or a_max")
    check_computable(a, lo, hi)
    npdt = probe_dtype(np.clip, a, lo, hi)
    td = torch_dtype(npdt)
    x = cast(a, td)

    def bound(v: object) -> torch.Tensor | None:
        if v is None:
            return None
        if isinstance(v, int) and not isinstance(v, bool) and npdt.kind in "iu":
            info = np.iinfo(npdt)  # NumPy clips out-of-range Python ints to the dtype's range
            v = builtins.min(builtins.max(v, int(info.min)), int(info.max))
        return _operand(v, td, x.device)

    return torch.clamp(x, min=bound(lo), max=bound(hi))


def where(condition: object, x: object = None, y: object = None, /) -> Any:
    """``numpy.where``: three-argument selection, or a tuple of index tensors with one argument."""
    if not isinstance(condition, torch.Tensor):
        raise UnsupportedOperation("condition must be a tensor")
    cond = condition if condition.dtype == torch.bool else condition != 0
    if x is None and y is None:
        # NumPy's index arrays are the columns of one C-ordered (n, ndim) array (torch's
        # nonzero gives the same values in F order)
        return torch.nonzero(cond if cond.dim() else cond.reshape(1)).contiguous().unbind(1)
    if x is None or y is None:
        raise UnsupportedOperation("numpy.where needs both x and y, or neither")
    check_computable(x, y)
    td = torch_dtype(probe_dtype(np.where, True, x, y))
    dev = condition.device
    return torch.where(cond, _operand(x, td, dev), _operand(y, td, dev))


def round_(a: torch.Tensor, decimals: int = 0, out: object = None) -> torch.Tensor:
    """``numpy.round``: half to even, ``rint(a * 10**d) / 10**d`` for ``decimals=d`` as NumPy."""
    require_default("out", out, None)
    check_computable(a)
    if a.dtype == torch.bool or not (a.dtype.is_floating_point or a.dtype.is_complex):
        if decimals >= 0:
            return a.clone()
        raise UnsupportedOperation("integer rounding to negative decimals is not supported")
    if a.dtype.is_complex:
        raise UnsupportedOperation("complex rounding is not supported")
    if decimals == 0:
        return torch.round(a)
    return torch.round(a, decimals=int(decimals))


def astype(
    self: torch.Tensor,
    dtype: object,
    order: str = "K",
    casting: str = "unsafe",
    subok: bool = True,
    copy: bool = True,
) -> torch.Tensor:
    """``numpy.ndarray.astype``: truncation toward zero for float to int, wrapping int to int.

    A float outside the target integer range (or NaN) is undefined behaviour in C; NumPy and torch
    give platform-dependent values there, so such casts are not guaranteed to agree.
    """
    if order not in ("K", "A", "C"):
        raise UnsupportedOperation(f"order={order!r} is not supported; expected 'K', 'A' or 'C'")
    td = torch_dtype(probe_dtype(_astype, self, dtype, casting))
    if td == self.dtype and not copy:
        return self
    return self.to(td, copy=True)


# -- declared checks ---------------------------------------------------------------------------

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


def _ufunc_check(name: str, nin: int) -> Check:
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
    {"absolute", "fabs", "square", "positive", "floor", "ceil", "trunc", "rint"} | set(_PREDICATE)
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


BACKENDS: dict[str, Callable[..., Any]] = {}
for _name, _op in _ARITH.items():
    BACKENDS[f"numpy.{_name}"] = _binary(_name, _op)
for _name, _op in _COMPARE.items():
    BACKENDS[f"numpy.{_name}"] = _compare(_name, _op)
for _name, _op in _UNARY.items():
    BACKENDS[f"numpy.{_name}"] = _unary(_name, _op)
for _name, _op in _PREDICATE.items():
    BACKENDS[f"numpy.{_name}"] = _unary(_name, _op, predicate=True)
BACKENDS.update(
    {
        "numpy.clip": clip,
        "numpy.ndarray.clip": clip,
        "numpy.where": where,
        "numpy.round": round_,
        "numpy.around": round_,
        "numpy.ndarray.round": round_,
        "numpy.ndarray.astype": astype,
    }
)

_TRANSCENDENTAL = [
    "arccos",
    "arccosh",
    "arcsin",
    "arcsinh",
    "arctan",
    "arctan2",
    "arctanh",
    "cos",
    "cosh",
    "deg2rad",
    "exp",
    "exp2",
    "expm1",
    "hypot",
    "log",
    "log10",
    "log1p",
    "log2",
    "power",
    "rad2deg",
    "reciprocal",
    "sin",
    "sinh",
    "sqrt",
    "tan",
    "tanh",
]
# Complex arithmetic in torch rounds its own way (a float ulp or two); real results are exact.
_COMPLEX_ULPS = ("absolute", "multiply", "divide", "square")

# Arithmetic, comparisons, clip, where, rounding and casts are exact (no tolerance): IEEE +, -, *
# and / are correctly rounded in both. torch.sqrt and reciprocal are vectorized and were seen
# 1 ulp off, so they share the libm tolerance.
LIBM = Tolerance(
    atol=1e-5,
    rtol=1e-3,
    note="NumPy's SIMD libm and torch's Sleef differ by a few ulp: 1 float16 ulp is 9.8e-4 "
    "relative; float32 and float64 results agree to a few ulp of their own type",
)
COMPLEX_ARITHMETIC = Tolerance(
    rtol=3e-7,
    note="real operands exact; complex results one or two float32 ulp apart (torch's complex "
    "multiply, divide and hypot round otherwise than NumPy's)",
)
# Results are laid out as NumPy's ufuncs lay them out after their operands (order K), not as
# torch's iterator does: they differ on mixed layouts and on views NumPy walks flipped (rot90).
_QUIRKS: dict[str, dict[str, Any]] = {
    **{n: {"check": _ufunc_check(n, 2), "order": "ufunc"} for n in (*_ARITH, *_COMPARE)},
    **{n: {"check": _ufunc_check(n, 1), "order": "ufunc"} for n in (*_UNARY, *_PREDICATE)},
    "clip": {"check": check_clip, "order": "ufunc"},
    "where": {"check": check_where, "order": "ufunc"},
    "round": {"check": check_round, "order": "ufunc"},
    "around": {"check": check_round, "order": "ufunc"},
}
for _name in _TRANSCENDENTAL:
    _QUIRKS[_name]["tolerance"] = LIBM
for _name in _COMPLEX_ULPS:
    _QUIRKS[_name]["tolerance"] = COMPLEX_ARITHMETIC
OPS = ops_of(BACKENDS, _QUIRKS)

"""NumPy's ufuncs on torch: each ufunc's torch kernel (binary arithmetic, comparisons, unary math,
predicates) and the backend factories that give each one NumPy's signature, result dtype (asked
from NumPy on 0-d probes) and operand casts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from codedag.backends.ops.numpy._common import (
    NUMPY_OF_TORCH,
    cast,
    check_computable,
    first_device,
    named,
    probe_dtype,
    require_default,
    result_type,
    torch_dtype,
)
from codedag.errors import UnsupportedOperation

TorchFn = Callable[..., torch.Tensor]


def operand(x: object, td: torch.dtype, device: torch.device) -> torch.Tensor:
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


def power(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``numpy.power``'s kernel: NumPy's exact paths for the exponents 2 and -1, refusing
    negative integer powers of integers (NumPy raises)."""
    exact = a.dtype.is_floating_point or a.dtype.is_complex or a.dtype == torch.bool
    if not exact and bool((b < 0).any()):
        raise UnsupportedOperation("integers to negative integer powers: NumPy raises")
    # (a meta tensor has no value to read: shapes are inferred alike either way)
    if a.dtype.is_floating_point and b.numel() == 1 and b.device.type != "meta":
        fast = _FAST_POWERS.get(float(b)) if not b.dtype.is_complex else None
        if fast is not None:
            return fast(a.to(torch.result_type(a, b)))
    return torch.pow(a, b)


def fmod(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """C's ``fmod``, exact as NumPy's. torch's vectorized CPU kernel divides first and gives NaN
    where ``a / b`` overflows (``fmod(1.5, 1e-310)``, or ``1e300`` by ``1e-10``, from eight
    elements on): those elements are computed again by NumPy."""
    mod = torch.fmod(a, b)
    if mod.device.type != "cpu" or mod.dtype not in _NUMPY_FLOATS:
        return mod
    x, y = torch.broadcast_tensors(a, b)
    wrong = torch.isnan(mod) & torch.isfinite(x) & torch.isfinite(y) & (y != 0)
    if bool(wrong.any()):
        exact = np.fmod(x[wrong].numpy(force=True), y[wrong].numpy(force=True))
        mod[wrong] = torch.from_numpy(exact)
    return mod


_NUMPY_FLOATS = (torch.float16, torch.float32, torch.float64)


def remainder(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``numpy.remainder``'s kernel. Floats as NumPy's ``npy_divmod`` computes them: ``fmod``
    (exact), moved to the divisor's sign, a zero signed as the divisor; torch's
    ``a - b * floor(a / b)`` gives NaN where ``a / b`` overflows (a subnormal divisor) and other
    signs of zero. Half floats in single precision, as NumPy does."""
    if not a.dtype.is_floating_point:
        return _int_safe(torch.remainder)(a, b)
    wide = a.dtype == torch.float16
    x, y = (a.float(), b.float()) if wide else (a, b)
    mod = fmod(x, y)
    mod = torch.where((mod != 0) & ((y < 0) != (mod < 0)), mod + y, mod)
    mod = torch.where((mod == 0) & (y != 0), torch.copysign(torch.zeros_like(mod), y), mod)
    return mod.to(a.dtype) if wide else mod


def floor_divide(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``numpy.floor_divide``'s kernel: integers as :func:`_int_safe` gives them (0 where the
    divisor is 0), half floats in single precision rounded once, as NumPy computes them (torch's
    half kernel rounds each intermediate: 4.6 % of random half pairs came out a step off)."""
    if a.dtype == torch.float16:
        return torch.floor_divide(a.float(), b.float()).to(torch.float16)
    return _int_safe(torch.floor_divide)(a, b)


ARITH: dict[str, TorchFn] = {
    "add": torch.add,
    "subtract": torch.sub,
    "multiply": torch.mul,
    "divide": torch.true_divide,
    "floor_divide": floor_divide,
    "remainder": remainder,
    "fmod": _int_safe(fmod),
    "power": power,
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
COMPARE: dict[str, TorchFn] = {
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
UNARY: dict[str, TorchFn] = {
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
PREDICATE: dict[str, TorchFn] = {
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


def _binary_signature(
    name: str, compute: Callable[[Any, Any, str, Any], torch.Tensor], takes_dtype: bool, doc: str
) -> Callable[..., torch.Tensor]:
    """A two-operand backend with the ufunc's signature: its keyword arguments checked, then
    ``compute(x1, x2, casting, dtype)``."""

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
        if not takes_dtype:
            require_default("dtype", dtype, None)
        _require_tensor(x1, x2)
        check_computable(x1, x2)
        return compute(x1, x2, casting, dtype)

    return named(backend, name, doc)


def _dtype_kwargs(casting: str, dtype: Any) -> dict[str, Any]:
    kw: dict[str, Any] = {"casting": casting}
    if dtype is not None:
        kw["dtype"] = dtype
    return kw


def binary(name: str, op: TorchFn) -> Callable[..., torch.Tensor]:
    """The backend of the binary ufunc ``numpy.<name>`` computed by ``op``."""
    ufunc = getattr(np, name)

    def compute(x1: Any, x2: Any, casting: str, dtype: Any) -> torch.Tensor:
        td = torch_dtype(probe_dtype(ufunc, x1, x2, **_dtype_kwargs(casting, dtype)))
        dev = first_device(x1, x2)
        return cast(op(operand(x1, td, dev), operand(x2, td, dev)), td)

    doc = f"``numpy.{name}`` with NumPy's result dtype (NEP 50 promotion)."
    return _binary_signature(name, compute, True, doc)


def compare(name: str, op: TorchFn) -> Callable[..., torch.Tensor]:
    """The backend of the comparison or logical ufunc ``numpy.<name>`` computed by ``op``."""
    ufunc = getattr(np, name)
    logical = name.startswith("logical_")

    def compute(x1: Any, x2: Any, casting: str, dtype: Any) -> torch.Tensor:
        probe_dtype(ufunc, x1, x2, casting=casting)
        dev = first_device(x1, x2)
        if logical:
            return op(operand(x1, torch.bool, dev), operand(x2, torch.bool, dev))
        common = result_type(x1, x2)
        td = torch_dtype(common)
        # NumPy 2 compares out-of-range Python ints exactly (uint8 > -1 is True): widen then.
        if common.kind in "iu" and any(
            isinstance(x, int) and not isinstance(x, bool) and not _fits(x, common)
            for x in (x1, x2)
        ):
            td = torch.int64
        return op(operand(x1, td, dev), operand(x2, td, dev))

    doc = f"``numpy.{name}``: compares in NumPy's common dtype, returns bool."
    return _binary_signature(name, compute, False, doc)


def _fits(value: int, dtype: np.dtype) -> bool:
    info = np.iinfo(dtype)
    return int(info.min) <= value <= int(info.max)


_WIDE_INTERMEDIATE = frozenset({"sinh", "cosh"})


def unary(name: str, op: TorchFn, predicate: bool = False) -> Callable[..., torch.Tensor]:
    """The backend of the unary ufunc (or predicate) ``numpy.<name>`` computed by ``op``."""
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
        res = probe_dtype(ufunc, x, **_dtype_kwargs(casting, dtype))
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

    return named(backend, name, f"``numpy.{name}`` with NumPy's result dtype.")

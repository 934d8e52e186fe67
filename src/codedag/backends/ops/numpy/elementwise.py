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
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import Tolerance
from codedag.backends.ops.numpy._adapter import ops_of
from codedag.backends.ops.numpy._common import (
    cast,
    check_computable,
    probe_dtype,
    require_default,
    torch_dtype,
)
from codedag.backends.ops.numpy._elementwise_checks import (
    check_clip,
    check_round,
    check_where,
    ufunc_check,
)
from codedag.backends.ops.numpy._ufuncs import (
    ARITH,
    COMPARE,
    PREDICATE,
    UNARY,
    binary,
    compare,
    operand,
    unary,
)
from codedag.errors import UnsupportedOperation


def _astype(probe: np.ndarray, dtype: Any, casting: Any) -> np.ndarray:
    return probe.astype(dtype, casting=casting)


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
        return operand(v, td, x.device)

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
    return torch.where(cond, operand(x, td, dev), operand(y, td, dev))


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


BACKENDS: dict[str, Callable[..., Any]] = {}
for _name, _op in ARITH.items():
    BACKENDS[f"numpy.{_name}"] = binary(_name, _op)


for _name, _op in COMPARE.items():
    BACKENDS[f"numpy.{_name}"] = compare(_name, _op)
for _name, _op in UNARY.items():
    BACKENDS[f"numpy.{_name}"] = unary(_name, _op)
for _name, _op in PREDICATE.items():
    BACKENDS[f"numpy.{_name}"] = unary(_name, _op, predicate=True)
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
    **{n: {"check": ufunc_check(n, 2), "order": "ufunc"} for n in (*ARITH, *COMPARE)},
    **{n: {"check": ufunc_check(n, 1), "order": "ufunc"} for n in (*UNARY, *PREDICATE)},
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

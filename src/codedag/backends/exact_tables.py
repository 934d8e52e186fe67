"""Which element-wise NumPy calls a 256-entry lookup table computes exactly.

Two engines replace a run of element-wise calls on a ``uint8`` array by one gather from a table,
the calls applied once to the 256 possible values: the batched executor's fusion
(:mod:`codedag.backends.batched.fusion`) and the migrator's lookup tables
(:mod:`codedag.migrate.tables.lookup`). The table equals NumPy's result on the array bit for bit
when every call gives each element a function of its operands' values alone, whatever the
array's length, strides, and the loop NumPy picks for it (a SIMD loop for a long contiguous
array, another for a short or strided one, as a table of 256 values or a per-channel constant
makes it). This module is the one rule both follow, call by call on the table's values:

* :data:`EXACT_UFUNCS`: results IEEE 754 rounds correctly (``+ - * /``, ``sqrt``, ``square``,
  ``rint`` ...) or that are exact (comparisons, integer arithmetic, sign bits): every loop on
  every CPU gives the same bits. Always admitted.
* :data:`CHECKED_UFUNCS`: float results IEEE 754 leaves open (which zero ``minimum(-0.0, 0.0)``
  gives, which NaN a ``clip`` keeps) or does not round correctly (powers, exponentials,
  logarithms, trigonometry): a SIMD loop and the scalar one may differ. Admitted on integer
  results always; on a float dtype only where :func:`loops_agree` found, once per process and
  (ufunc, dtype) on this machine, that all of NumPy's loops give the same bits.
* :data:`CASTS`: admitted, except floats to an integer type where a value is NaN, infinite or
  outside the target's range: C leaves that undefined and NumPy's loops differ (here a float64
  ``-inf`` cast to ``uint32`` gives one value in a long array, another in a short one).
* anything else (``matmul``, a call with several results) is refused.

Floating-point warnings are not part of the rule: a table computes all 256 values, so it raises
the exceptions of values the array may not hold. The lookup tables refuse such probes; the
batched executor's steps never warn (they run on torch).
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

EXACT_UFUNCS = frozenset(
    {
        "add", "subtract", "multiply", "divide", "negative", "positive", "absolute", "fabs",
        "sqrt", "square", "reciprocal", "floor", "ceil", "trunc", "rint", "copysign",
        "equal", "not_equal", "less", "less_equal", "greater", "greater_equal",
        "logical_and", "logical_or", "logical_xor", "logical_not",
        "isnan", "isinf", "isfinite", "signbit",
        "bitwise_and", "bitwise_or", "bitwise_xor", "invert", "left_shift", "right_shift",
    }
)  # fmt: skip
"""Ufuncs (by ``__name__``) whose every loop gives the same bits: correctly rounded or exact."""

CHECKED_UFUNCS = frozenset(
    {
        "minimum", "maximum", "fmin", "fmax", "clip", "sign",
        "power", "float_power", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p",
        "logaddexp", "logaddexp2", "sin", "cos", "tan", "arcsin", "arccos", "arctan",
        "sinh", "cosh", "tanh", "arcsinh", "arccosh", "arctanh", "arctan2", "hypot", "cbrt",
        "deg2rad", "rad2deg", "degrees", "radians", "floor_divide", "remainder", "fmod",
    }
)  # fmt: skip
"""Ufuncs admitted on float results only where :func:`loops_agree` on this machine."""

CASTS = frozenset(
    {
        "numpy.ndarray.astype",
        "numpy.ndarray.copy",
        "numpy.copy",
        "numpy.array",
        "numpy.asarray",
        "numpy.asanyarray",
        "numpy.ascontiguousarray",
    }
)
"""Casts and copies: exact but for floats out of an integer target's range (see the module)."""

_OPERATORS = {
    "add": "add", "sub": "subtract", "mul": "multiply", "truediv": "divide", "neg": "negative",
    "pos": "positive", "abs": "absolute", "pow": "power", "floordiv": "floor_divide",
    "mod": "remainder", "lt": "less", "le": "less_equal", "gt": "greater",
    "ge": "greater_equal", "eq": "equal", "ne": "not_equal", "and_": "bitwise_and",
    "or_": "bitwise_or", "xor": "bitwise_xor", "invert": "invert", "lshift": "left_shift",
    "rshift": "right_shift",
}  # fmt: skip


def ufunc_name(name: str) -> str | None:
    """The ufunc (its ``__name__``) a call's canonical name applies, or None.

    ``operator.truediv`` and ``numpy.true_divide`` give ``divide``; ``numpy.clip`` gives ``clip``.
    """
    module, _, short = name.rpartition(".")
    if module == "operator":
        return _OPERATORS.get(short)
    if module != "numpy":
        return None
    if short == "clip":
        return "clip"
    found = getattr(np, short, None)
    return found.__name__ if isinstance(found, np.ufunc) else None


def _names() -> frozenset[str]:
    ufuncs = EXACT_UFUNCS | CHECKED_UFUNCS
    found = {f"operator.{short}" for short, u in _OPERATORS.items() if u in ufuncs}
    found |= {f"numpy.{u}" for u in ufuncs if isinstance(getattr(np, u, None), np.ufunc)}
    found |= {"numpy.clip", "numpy.true_divide", "numpy.abs"}
    return frozenset(found | CASTS)


NAMES = _names()
"""Every call name the rule may admit (whether it does depends on dtypes and values)."""


def refusal(name: str, source: np.ndarray, result: Any) -> str | None:
    """Why a call's table is not exact, or None where it is.

    Args:
        name: the call's canonical name (``numpy.exp``, ``operator.truediv``, a cast of
            :data:`CASTS`).
        source: the table the call took (the run's values before it).
        result: what the call gave on it.
    """
    if type(result) is not np.ndarray or result.dtype.kind not in "biuf":
        return f"{name} gives {getattr(result, 'dtype', type(result).__name__)}, not numbers"
    if name in CASTS:
        return _cast_refusal(name, source, result)
    ufunc = ufunc_name(name)
    if ufunc in EXACT_UFUNCS or (ufunc in CHECKED_UFUNCS and result.dtype.kind in "biu"):
        return None
    if ufunc in CHECKED_UFUNCS:
        if loops_agree(ufunc, result.dtype):
            return None
        return f"{ufunc} on {result.dtype}: NumPy's loops give different bits on this machine"
    return f"{name} is not an element-wise call a table computes exactly"


def _cast_refusal(name: str, source: np.ndarray, result: np.ndarray) -> str | None:
    if source.dtype.kind != "f" or result.dtype.kind not in "iu":
        return None
    info = np.iinfo(result.dtype)
    values = source.astype(np.float64)
    # truncation toward zero keeps (min - 1, max + 1) in range; both bounds are exact floats
    # for every integer type up to 64 bits but int64's min - 1 (rounded to min: stricter)
    low, high = float(info.min) - 1.0, float(info.max) + 1.0
    with np.errstate(invalid="ignore"):
        inside = bool(((values > low) & (values < high)).all())
    if inside:
        return None
    return f"{name} of {source.dtype} to {result.dtype}: a value is NaN, infinite or out of range"


# -- the self-check ------------------------------------------------------------------------------

_CLIP: Any = getattr(np, "_core", np).umath.clip  # the ufunc np.clip calls: no wrapper per call
_AGREE: dict[tuple[str, str], bool] = {}
_LOCK = threading.Lock()
_CONSTANTS = (0.0, -0.0, np.nan, -np.nan, 1.0, -1.0, 0.5, 2.0, 2.2, 1 / 2.2, 3.0, -1.5, 255.0,
              np.inf, -np.inf)  # fmt: skip
_LOWER = (0.0, -0.0, np.nan, -1.0)  # clip's bounds, in pairs
_UPPER = (0.0, -0.0, np.nan, 1.0)
_SHORT = 128  # witness values also computed in short arrays (1 to 17 elements)
_SINGLES = 24  # the special values (first in the witness) also computed one by one


def loops_agree(ufunc: str, dtype: np.dtype) -> bool:
    """Whether NumPy's loops for ``ufunc`` on ``dtype`` agree bit for bit on this machine.

    The ufunc runs on a witness of values (special values: zeros of both signs, NaNs of both
    signs, infinities, subnormals, the extremes; the 256 byte values and their scalings; random
    bit patterns and magnitudes), each operand position in turn against constants of the same
    special kinds, in the layouts a table and an array meet: a long contiguous array, a strided
    and a reversed one, short arrays of 1 to 17 elements, a per-channel constant broadcast
    along a last axis of 3, and a constant given as a full array. Computed once per process.
    """
    key = (ufunc, np.dtype(dtype).str)
    found = _AGREE.get(key)
    if found is None:
        found = _check(ufunc, np.dtype(dtype))
        with _LOCK:
            _AGREE[key] = found
    return found


def _check(ufunc: str, dtype: np.dtype) -> bool:
    function: Any = _CLIP if ufunc == "clip" else getattr(np, ufunc)
    nin = function.nin
    values = _witness(dtype)
    if nin == 1:
        configurations: list[tuple[Any, ...]] = [()]
    elif nin == 2:
        configurations = [(c,) for c in _CONSTANTS]
    else:
        configurations = [(lo, hi) for lo in _LOWER for hi in _UPPER]
    with np.errstate(all="ignore"):
        for constants in configurations:
            for position in range(nin):
                if not _agree(function, values, position, [dtype.type(c) for c in constants]):
                    return False
        if nin == 2:
            other = np.random.default_rng(1).permutation(values)
            both = function(values, other)
            short = _short(lambda part: function(values[part], other[part]))
            singles = _short(lambda part: function(values[part], other[part]), _SINGLES, 1)
            if not (_same(both[:_SHORT], short) and _same(both[:_SINGLES], singles)):
                return False
    return True


def _agree(function: Any, values: np.ndarray, position: int, constants: list[Any]) -> bool:
    """Whether the layouts agree with the constants as scalars, and as per-channel arrays
    broadcast along a last axis of 3 (another loop: each is compared with itself only, as a
    table and its array always meet the constants the same way)."""

    def apply(data: np.ndarray, others: list[Any]) -> Any:
        operands = list(others)
        operands.insert(position, data)
        return function(*operands)

    channels = [np.full(3, c, values.dtype) for c in constants]
    rows = values[: (len(values) // 3) * 3].reshape(-1, 3)
    return _layouts_agree(lambda d: apply(d, constants), values) and _layouts_agree(
        lambda d: apply(d, channels), rows
    )


def _layouts_agree(apply: Any, data: np.ndarray) -> bool:
    """``apply`` gives the same bits on ``data`` contiguous, strided, and in short parts."""
    long = apply(data)
    spaced = np.empty((2 * len(data), *data.shape[1:]), data.dtype)
    spaced[::2] = data
    return (
        _same(long, apply(spaced[::2]))
        and _same(long[:_SHORT], _short(lambda part: apply(data[part])))
        and _same(long[:_SINGLES], _short(lambda part: apply(data[part]), _SINGLES, 1))
    )


def _short(apply: Any, count: int = _SHORT, longest: int = 17) -> np.ndarray:
    """``apply`` on the first ``count`` rows, in parts of 1 to ``longest`` rows."""
    pieces, start, length = [], 0, 1
    while start < count:
        pieces.append(apply(slice(start, min(start + length, count))))
        start += length
        length = length % longest + 1
    return np.concatenate(pieces)


def _same(a: Any, b: Any) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def _witness(dtype: np.dtype) -> np.ndarray:
    kind = dtype.type
    info = np.finfo(dtype)
    nan = np.array(np.nan, dtype)
    special = np.array(
        [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, np.inf, -np.inf, info.max, -info.max, info.tiny,
         info.smallest_subnormal, -info.smallest_subnormal, info.eps, 255.0, 256.0],
        dtype,
    )  # fmt: skip
    nans = np.stack([nan, -nan, (nan.view(_UINT[dtype.itemsize]) | 1).view(dtype)])
    rng = np.random.default_rng(0)
    byte_values = np.arange(256).astype(dtype)
    bits = rng.integers(0, 1 << (8 * dtype.itemsize), 512, dtype=np.uint64, endpoint=False)
    random_bits = bits.astype(_UINT[dtype.itemsize]).view(dtype)
    magnitudes = np.exp(rng.uniform(-9.0, 9.0, 512)) * rng.choice([-1.0, 1.0], 512)
    parts = [byte_values, byte_values / kind(255), byte_values - kind(128), special]
    rest = np.concatenate([*parts, random_bits, magnitudes.astype(dtype)]).astype(dtype)
    return np.concatenate([special, nans, rng.permutation(rest)])  # special values first


_UINT = {2: np.uint16, 4: np.uint32, 8: np.uint64}

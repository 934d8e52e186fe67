"""Declared checks of NumPy's shape functions, padding and products (:mod:`.shape`): what each
backend does not reproduce, decided on the call's own arguments before anything is converted."""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from codedag.backends.contract import Check
from codedag.backends.ops.numpy._checks import (
    computable,
    declared,
    operands,
    output_values,
    refuse,
)
from codedag.errors import UnsupportedOperation


def _sequence(arrays: Any) -> list[np.ndarray]:
    refuse(not isinstance(arrays, list | tuple) or not arrays, "a non-empty list of arrays")
    refuse(not all(isinstance(a, np.ndarray) for a in arrays), "a list holding non-arrays")
    operands(*arrays)
    return list(arrays)


def _join_shapes(shapes: list[tuple[int, ...]], axis: int) -> None:
    ndim = len(shapes[0])
    refuse(ndim == 0, "zero-dimensional arrays cannot be concatenated")
    refuse(any(len(s) != ndim for s in shapes), f"arrays of different ranks {shapes}")
    refuse(not -ndim <= axis < ndim, f"axis {axis} out of bounds")
    ax = axis % ndim
    refuse(
        any(s[:ax] + s[ax + 1 :] != shapes[0][:ax] + shapes[0][ax + 1 :] for s in shapes),
        f"shapes {shapes} do not match off axis {axis}",
    )


def _join_dtype(arrays: list[np.ndarray], dtype: Any, casting: Any) -> None:
    empty = [np.empty((0,), a.dtype) for a in arrays]
    try:
        result = np.concatenate(empty, dtype=dtype, casting=casting).dtype
    except (TypeError, ValueError) as e:
        raise UnsupportedOperation(
            f"NumPy refuses dtype={dtype!r}, casting={casting!r}: {e}"
        ) from e
    refuse(not computable(result), "a {} result", result)


@declared
def check_concatenate(
    arrays: Any, axis: Any = 0, out: Any = None, *, dtype: Any = None, casting: Any = "same_kind"
) -> None:
    """Arrays of one rank whose shapes match off the axis (any shapes with ``axis=None``)."""
    arrs = _sequence(arrays)
    if axis is not None:
        refuse(not isinstance(axis, numbers.Integral), f"axis={axis!r}")
        _join_shapes([a.shape for a in arrs], int(axis))
    _join_dtype(arrs, dtype, casting)


@declared
def check_stack(
    arrays: object,
    axis: object = 0,
    out: object = None,
    *,
    dtype: object = None,
    casting: object = "same_kind",
) -> None:
    """Arrays of one shape; an axis within rank + 1."""
    arrs = _sequence(arrays)
    refuse(len({a.shape for a in arrs}) != 1, "arrays of different shapes")
    ndim = arrs[0].ndim + 1
    refuse(
        not isinstance(axis, numbers.Integral) or not -ndim <= int(axis) < ndim, f"axis={axis!r}"
    )
    _join_dtype(arrs, dtype, casting)


@declared
def check_hstack(tup: object, *, dtype: object = None, casting: object = "same_kind") -> None:
    """``concatenate`` of the arrays at least 1-d, along axis 0 (1-d arrays) or 1."""
    arrs = _sequence(tup)
    shapes = [a.shape or (1,) for a in arrs]
    _join_shapes(shapes, 0 if len(shapes[0]) == 1 else 1)
    _join_dtype(arrs, dtype, casting)


@declared
def check_vstack(tup: object, *, dtype: object = None, casting: object = "same_kind") -> None:
    """``concatenate`` of the arrays at least 2-d, along axis 0."""
    arrs = _sequence(tup)
    _join_shapes([np.atleast_2d(np.empty(a.shape, bool)).shape for a in arrs], 0)
    _join_dtype(arrs, dtype, casting)


_PAD_MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


@declared
def check_pad(array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> None:
    """Modes constant, edge, reflect (even), symmetric, wrap; non-negative integer widths; no
    empty axis to pad except with constants."""
    refuse(not isinstance(array, np.ndarray) or array.ndim == 0, "a scalar or 0-d array")
    operands(array)
    refuse(mode not in _PAD_MODES, f"pad mode {mode!r} is not reproduced")
    allowed = {"constant_values"} if mode == "constant" else {"reflect_type"}
    refuse(set(kwargs) - allowed, f"pad arguments {sorted(set(kwargs) - allowed)}")
    refuse(kwargs.get("reflect_type", "even") != "even", "reflect_type='odd' is not reproduced")
    widths = np.asarray(pad_width)
    refuse(widths.dtype.kind not in "iu" or widths.size == 0, f"pad_width {pad_width!r}")
    try:
        full = np.broadcast_to(
            widths.reshape(-1, 2) if widths.size > 2 else widths.reshape(1, -1), (array.ndim, 2)
        )
    except ValueError as e:
        raise UnsupportedOperation(f"pad_width {pad_width!r} does not fit the array") from e
    refuse((full < 0).any(), "negative pad widths: NumPy raises")
    output_values([n + int(b) + int(a) for n, (b, a) in zip(array.shape, full, strict=True)])
    padded = [d for d, (b, a) in enumerate(full) if b or a]
    refuse(
        mode != "constant" and any(array.shape[d] == 0 for d in padded),
        f"padding an empty axis in mode {mode!r}",
    )
    if mode == "constant":
        values = np.asarray(kwargs.get("constant_values", 0))
        refuse(values.dtype.kind not in "biuf", "constant_values of another kind")


def _product_shapes(name: str, a: np.ndarray, b: np.ndarray) -> None:
    if name == "matmul":
        refuse(a.ndim == 0 or b.ndim == 0, "matmul of a 0-d array: NumPy raises")
        inner = b.shape[-2] if b.ndim > 1 else b.shape[0]
        refuse(a.shape[-1] != inner, f"matmul of shapes {a.shape} and {b.shape}")
        try:
            np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
        except ValueError as e:
            raise UnsupportedOperation(f"batch shapes {a.shape} and {b.shape}") from e
    elif a.ndim and b.ndim:
        inner = b.shape[0] if b.ndim == 1 else b.shape[-2]
        refuse(a.shape[-1] != inner, f"dot of shapes {a.shape} and {b.shape}")


def product_check(name: str) -> Check:
    """The declared check of ``numpy.<name>``, ``dot`` or ``matmul``: two arrays whose shapes
    multiply."""

    @declared
    def check(x1: Any, x2: Any, /, *args: Any, **kwargs: Any) -> None:
        refuse(not (isinstance(x1, np.ndarray) and isinstance(x2, np.ndarray)), "two arrays")
        refuse(bool(set(kwargs) - {"out"}) or len(args) > 1, "extra arguments")
        operands(x1, x2)
        refuse(np.result_type(x1, x2) == np.bool_, "boolean products")
        _product_shapes(name, x1, x2)

    return check


@declared
def check_tile(A: Any, reps: Any) -> None:
    """An array and non-negative integer repetitions."""
    refuse(not isinstance(A, np.ndarray), "a scalar stays in NumPy")
    operands(A)
    reps_t = (reps,) if isinstance(reps, numbers.Integral) else tuple(np.ravel(reps))
    refuse(
        not all(isinstance(r, numbers.Integral) and int(r) >= 0 for r in reps_t), f"reps={reps!r}"
    )
    # numpy.tile aligns reps and shape at their ends, padding the shorter with ones
    length = max(A.ndim, len(reps_t))
    shape = (1,) * (length - A.ndim) + A.shape
    counts = (1,) * (length - len(reps_t)) + tuple(int(r) for r in reps_t)
    output_values([n * r for n, r in zip(shape, counts, strict=True)])


@declared
def check_repeat(a: Any, repeats: Any, axis: Any = None) -> None:
    """An array, one non-negative integer count, an axis within its rank."""
    refuse(not isinstance(a, np.ndarray), "a scalar stays in NumPy")
    operands(a)
    refuse(not isinstance(repeats, numbers.Integral) or repeats < 0, f"repeats={repeats!r}")
    refuse(axis is not None and (a.ndim == 0 or not -a.ndim <= int(axis) < a.ndim), "axis")
    output_values([a.size, int(repeats)])

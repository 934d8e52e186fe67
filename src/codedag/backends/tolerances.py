"""How close each backend must come to the library it replaces, and the check that compares.

Each op declares its :class:`~codedag.backends.contract.Tolerance` next to its backend
(``declare(..., tolerance=...)``; absent: bit-exact). :data:`TOLERANCES` is the table of those
declarations (by declared and canonical name) that tests and the run-time check read; it is a view
of the registry, built on first use. ``atol`` is absolute on the library's output scale (0..255
for uint8 images), ``rtol`` relative to each element, ``scale_rtol`` to the output's largest
magnitude; ``max_mismatch_frac`` allows a fraction of elements to differ
by more (uint8 rounding at exact .5 ties, nearest-neighbour index ties), each by at most
``mismatch_atol``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

import numpy as np

from codedag.backends.contract import EXACT, Tolerance
from codedag.backends.derived import MappingView

__all__ = ["EXACT", "TOLERANCES", "Tolerance", "difference", "tolerance_for"]


def _declared() -> Mapping[str, Tolerance]:
    from codedag.backends.registry import default_registry

    return default_registry().tolerances()


TOLERANCES: Mapping[str, Tolerance] = MappingView(_declared)
"""Canonical or declared name -> the tolerance its op declares (ops declared without one are
absent: they must match exactly), sorted by name."""


def tolerance_for(name: str) -> Tolerance:
    """Return the tolerance of ``name``; backends without one must match exactly."""
    return _declared().get(name, EXACT)


def difference(name: str, expected: Any, actual: Any) -> str | None:
    """Why ``actual`` (a migrated call's result) is not ``expected`` (the library's) within the
    tolerance of ``name``; ``None`` when it is.

    Compares type, shape, dtype and values (NaN where the library has NaN), elementwise for
    arrays, tensors, NumPy and Python scalars and PIL images, recursively for tuples and lists.
    """
    if isinstance(expected, tuple | list):
        if type(actual) is not type(expected) or len(actual) != len(expected):
            return f"{type(actual).__name__} of {_len(actual)} where the library returns {type(expected).__name__} of {len(expected)}"
        for i, (e, a) in enumerate(zip(expected, actual)):
            problem = difference(name, e, a)
            if problem is not None:
                return f"item {i}: {problem}"
        return None
    if _is_pil(expected) or _is_pil(actual):
        if not (_is_pil(expected) and _is_pil(actual)):
            return f"{type(actual).__name__} where the library returns {type(expected).__name__}"
        if expected.mode != actual.mode or expected.size != actual.size:
            return f"PIL {actual.mode} {actual.size} where the library returns {expected.mode} {expected.size}"
        expected, actual = np.asarray(expected), np.asarray(actual)
    if type(actual) is not type(expected) and not (
        isinstance(expected, np.generic) and isinstance(actual, np.generic)
    ):
        return f"{type(actual).__name__} where the library returns {type(expected).__name__}"
    if not hasattr(expected, "dtype"):  # Python scalars and other plain values
        if isinstance(expected, float) and isinstance(actual, float):
            expected, actual = np.float64(expected), np.float64(actual)
        else:
            return (
                None if actual == expected else f"{actual!r} where the library returns {expected!r}"
            )
    exp = _as_numpy(expected)
    got = _as_numpy(actual)
    if got.shape != exp.shape:
        return f"shape {got.shape} where the library returns {exp.shape}"
    if got.dtype != exp.dtype:
        return f"dtype {got.dtype} where the library returns {exp.dtype}"
    return _value_difference(tolerance_for(name), exp, got)


def _len(value: Any) -> int | str:
    try:
        return len(value)
    except TypeError:
        return "?"


def _is_pil(value: object) -> bool:
    module = sys.modules.get("PIL.Image")
    return module is not None and isinstance(value, module.Image)


def _as_numpy(value: object) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        return np.asarray(value.detach().cpu().numpy())
    return np.asarray(value)


def _value_difference(tol: Tolerance, exp: np.ndarray, got: np.ndarray) -> str | None:
    if exp.size == 0:
        return None
    if exp.dtype.kind in "bOSUV":
        same = np.asarray(exp == got)
        return None if same.all() else f"{int((~same).sum())} of {exp.size} values differ"
    kind = np.complex128 if exp.dtype.kind == "c" else np.float64
    e, g = exp.astype(kind), got.astype(kind)
    nan_e, nan_g = np.isnan(e), np.isnan(g)
    if (nan_e != nan_g).any():
        return f"NaN at {int((nan_e != nan_g).sum())} positions where the library has none (or the reverse)"
    with np.errstate(invalid="ignore", over="ignore"):
        same = (e == g) | nan_e
        diff = np.where(same, 0.0, np.abs(g - e))
        allowed = tol.allowed(e)
        bad = diff > allowed
    if not bad.any():
        return None
    frac = float(bad.mean())
    worst = float(diff[bad].max())
    if frac <= tol.max_mismatch_frac and worst <= tol.mismatch_atol:
        return None
    return (
        f"{int(bad.sum())} of {bad.size} values ({frac:.2%}) differ, by up to {worst:g} "
        f"(tolerance: atol {tol.atol:g}, rtol {tol.rtol:g}, {tol.max_mismatch_frac:.2%} up to "
        f"{tol.mismatch_atol:g})"
    )

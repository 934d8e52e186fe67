"""Tolerances of every GPU backend against the library it replaces: the one table tests read.

``atol`` is absolute on the library's output scale (0..255 for uint8 images), ``rtol`` relative;
``max_mismatch_frac`` allows a fraction of elements to differ by more (uint8 rounding at exact
.5 ties, nearest-neighbour index ties), each by at most ``mismatch_atol``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Tolerance:
    """How close a backend's output must be to the reference."""

    atol: float = 0.0
    rtol: float = 0.0
    max_mismatch_frac: float = 0.0
    mismatch_atol: float = 0.0
    note: str = ""


EXACT = Tolerance()

# Canonical name -> tolerance. Keep grouped by library and sorted within a group.
TOLERANCES: dict[str, Tolerance] = {}

# --- numpy ------------------------------------------------------------------------------------
# Arithmetic, comparisons, clip, where, rounding, casts, shape functions, min/max/arg and integer
# reductions are exact (no entry). IEEE +, -, *, / and sqrt are correctly rounded in both.
_ULP_NOTE = (
    "NumPy's SIMD libm and torch's Sleef differ by a few ulp: 1 float16 ulp is 9.8e-4 relative; "
    "float32 and float64 results agree to a few ulp of their own type"
)
_TRANSCENDENTAL = Tolerance(atol=1e-5, rtol=1e-3, note=_ULP_NOTE)
_SUM_NOTE = (
    "float sums in another order (pairwise vs torch's cascade): float16 over up to 1e3 terms"
)
TOLERANCES.update(
    {
        f"numpy.{name}": _TRANSCENDENTAL
        for name in [
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
            "sin",
            "sinh",
            "tan",
            "tanh",
        ]
    }
)


def tolerance_for(name: str) -> Tolerance:
    """Return the tolerance of ``name``; backends without an entry must match exactly."""
    return TOLERANCES.get(name, EXACT)

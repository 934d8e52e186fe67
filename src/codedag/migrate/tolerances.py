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


def tolerance_for(name: str) -> Tolerance:
    """Return the tolerance of ``name``; backends without an entry must match exactly."""
    return TOLERANCES.get(name, EXACT)

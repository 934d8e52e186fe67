"""The tuner's statistics: DataLoader settings judged by the rule of :mod:`codedag.measure`.

Batches from a DataLoader with N workers arrive in bursts of N, so the tuner's samples are mean
batch intervals over whole cycles of N batches (nearly independent). A setting's figure is the
median of its cycle intervals (a cycle disturbed by other work does not move it), and two
settings are compared by :func:`codedag.measure.statistic.compare`: a setting is *clearly slower*
when its median interval exceeds the other's by more than the spread (the half-width of the
difference's 95 % interval, Student's t times the standard error estimated from the quartiles),
*clearly faster* when it is shorter by more than both the spread and the margin. No fixed
slowdown constant decides.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import codedag.measure.statistic as statistic
from codedag.measure.summary import Timing

MIN_SAMPLES = 3
"""Cycles a setting is timed for at least before it may be stopped early or compared."""


def median_s(samples_s: Sequence[float]) -> float:
    """Median of intervals in seconds (``nan`` when empty)."""
    return Timing.of_seconds(samples_s).median_ns / 1e9 if samples_s else math.nan


def median_se_s(samples_s: Sequence[float]) -> float:
    """Standard error of :func:`median_s` (``inf`` with fewer than two samples)."""
    if len(samples_s) < 2:
        return math.inf
    return Timing.of_seconds(samples_s).median_se_ns / 1e9


def compare(
    reference_s: Sequence[float], candidate_s: Sequence[float], margin: float = 0.0
) -> statistic.Comparison:
    """The candidate's intervals judged against the reference's (at least one of each)."""
    return statistic.compare(Timing.of_seconds(reference_s), Timing.of_seconds(candidate_s), margin)


def clearly_slower(candidate: Sequence[float], best: Sequence[float]) -> str | None:
    """Why ``candidate``'s intervals are clearly longer than ``best``'s, or ``None``.

    Both need :data:`MIN_SAMPLES` samples; the difference of the medians must exceed its spread.
    """
    if len(candidate) < MIN_SAMPLES or len(best) < MIN_SAMPLES:
        return None
    judged = compare(best, candidate)
    if judged.b_slower:
        return (
            f"{-judged.saving_ns / 1e6:.1f} ms per batch slower than the best so far after "
            f"{len(candidate)} cycles (> {judged.spread_ns / 1e6:.1f} ms, the 95 % interval of "
            "the difference of the medians)"
        )
    return None


def clearly_faster(candidate: Sequence[float], reference: Sequence[float], margin: float) -> bool:
    """Whether ``candidate``'s intervals are shorter than ``reference``'s beyond noise and margin.

    Args:
        candidate: mean batch intervals of the candidate's cycles.
        reference: those of the reference.
        margin: the smallest relative gain worth a change (0.05: 5 %).
    """
    if len(candidate) < 2 or len(reference) < 2:
        return False
    return compare(reference, candidate, margin).b_faster

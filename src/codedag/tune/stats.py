"""The statistics behind the tuner's decisions: means, standard errors, Welch's t-test.

Batches from a DataLoader with N workers arrive in bursts of N, so the tuner's samples are mean
batch intervals over whole cycles of N batches (nearly independent), and two settings are
compared with Welch's unequal-variance t-test: a setting is *clearly slower* when its mean
interval exceeds the other's by more than the 97.5 % one-sided critical value times the
standard error of the difference. No fixed slowdown constant decides.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence

# Two-sided 95 % (one-sided 97.5 %) critical values of Student's t for 1..30 degrees of freedom.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip

MIN_SAMPLES = 3
"""Cycles a setting is timed for at least before it may be stopped early or compared."""


def t_critical(df: float) -> float:
    """Student's t 0.975 quantile for ``df`` degrees of freedom (table, then an expansion)."""
    if not math.isfinite(df) or df > 30:
        return 1.96 + 2.5 / df if math.isfinite(df) else 1.96
    index = max(1, math.floor(df)) - 1
    return _T975[index]


def mean(samples: Sequence[float]) -> float:
    """Arithmetic mean (``nan`` when empty)."""
    return statistics.fmean(samples) if samples else float("nan")


def stderr(samples: Sequence[float]) -> float:
    """Standard error of the mean (``inf`` with fewer than two samples)."""
    if len(samples) < 2:
        return float("inf")
    return statistics.stdev(samples) / math.sqrt(len(samples))


def welch(a: Sequence[float], b: Sequence[float]) -> tuple[float, float, float]:
    """``(mean(a) - mean(b), standard error of that difference, Welch's degrees of freedom)``."""
    se_a, se_b = stderr(a), stderr(b)
    diff = mean(a) - mean(b)
    var_a, var_b = se_a**2, se_b**2
    se = math.sqrt(var_a + var_b)
    if not math.isfinite(se) or se == 0:
        return diff, se, float("inf")
    denominator = 0.0
    if len(a) > 1:
        denominator += var_a**2 / (len(a) - 1)
    if len(b) > 1:
        denominator += var_b**2 / (len(b) - 1)
    df = (var_a + var_b) ** 2 / denominator if denominator > 0 else float("inf")
    return diff, se, df


def clearly_slower(candidate: Sequence[float], best: Sequence[float]) -> str | None:
    """Why ``candidate``'s intervals are clearly longer than ``best``'s, or ``None``.

    Both need :data:`MIN_SAMPLES` samples; the difference must exceed the t critical value times
    its standard error.
    """
    if len(candidate) < MIN_SAMPLES or len(best) < MIN_SAMPLES:
        return None
    diff, se, df = welch(candidate, best)
    threshold = t_critical(df) * se
    if diff > threshold:
        return (
            f"{diff * 1e3:.1f} ms per batch slower than the best so far after "
            f"{len(candidate)} cycles (> {threshold * 1e3:.1f} ms, Welch t-test at 97.5 %)"
        )
    return None


def clearly_faster(candidate: Sequence[float], reference: Sequence[float], margin: float) -> bool:
    """Whether ``candidate``'s intervals are shorter than ``reference``'s beyond noise and margin.

    Args:
        candidate: mean batch intervals of the candidate.
        reference: those of the reference.
        margin: the smallest relative gain worth a change (0.05: 5 %).
    """
    if len(candidate) < 2 or len(reference) < 2:
        return False
    diff, se, df = welch(reference, candidate)
    return diff > t_critical(df) * se and mean(candidate) < mean(reference) * (1.0 - margin)

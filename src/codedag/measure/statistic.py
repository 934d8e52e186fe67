"""The statistic every A-against-B timing is judged by, and its significance rule.

Each way keeps its own samples, summarized by their median (:class:`~.summary.Timing`). B's
*saving* is ``median(A) - median(B)``. Its *spread* is the half-width of a 95 % interval:
Student's t quantile (Welch-Satterthwaite degrees of freedom, so about 2 from some thirty samples
on, more for a handful) times the standard error of the difference, each median's standard error
estimated robustly from its quartiles. The verdict:

* **faster**: the saving exceeds both the spread (the interval excludes zero) and the margin (the
  smallest gain worth a change, a fraction of A's median);
* **slower**: B's loss exceeds the spread;
* **tie**: anything else (within the noise, or a gain too small to count).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

from codedag.errors import ConfigError
from codedag.measure.summary import Timing

# Two-sided 95 % (one-sided 97.5 %) critical values of Student's t for 1..30 degrees of freedom.
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_critical(df: float) -> float:
    """Student's t 0.975 quantile for ``df`` degrees of freedom (table, then an expansion)."""
    if not math.isfinite(df) or df > 30:
        return 1.96 + 2.5 / df if math.isfinite(df) else 1.96
    index = max(1, math.floor(df)) - 1
    return _T975[index]


def welch_df(a: Timing, b: Timing) -> float:
    """Welch-Satterthwaite degrees of freedom of the difference of two medians (``inf`` when
    neither has a spread)."""
    var_a, var_b = a.median_se_ns**2, b.median_se_ns**2
    denominator = 0.0
    if a.samples > 1:
        denominator += var_a**2 / (a.samples - 1)
    if b.samples > 1:
        denominator += var_b**2 / (b.samples - 1)
    if denominator <= 0 or var_a + var_b <= 0:
        return math.inf
    return (var_a + var_b) ** 2 / denominator


def difference_spread_ns(a: Timing, b: Timing) -> float:
    """Half-width of the 95 % interval of ``a.median - b.median``."""
    se = math.hypot(a.median_se_ns, b.median_se_ns)
    return t_critical(welch_df(a, b)) * se if se > 0 else 0.0


class Verdict(str, enum.Enum):
    """What a comparison says of B against A."""

    FASTER = "faster"
    SLOWER = "slower"
    TIE = "tie"


def verdict(saving_ns: float, spread_ns: float, margin_ns: float = 0.0) -> Verdict:
    """The rule: B is faster when its saving exceeds both the spread and the margin, slower
    when its loss exceeds the spread, else a tie.

    Args:
        saving_ns: A's time minus B's (positive: B is faster).
        spread_ns: half-width of the interval of the saving.
        margin_ns: the smallest saving worth a change.
    """
    if saving_ns > spread_ns and saving_ns > margin_ns:
        return Verdict.FASTER
    if -saving_ns > spread_ns:
        return Verdict.SLOWER
    return Verdict.TIE


@dataclass(frozen=True)
class Comparison:
    """B against A, judged by :func:`verdict`.

    Attributes:
        a: A's timing (the reference: the original, your settings).
        b: B's timing (the candidate).
        saving_ns: ``a.median_ns - b.median_ns``.
        spread_ns: half-width of the 95 % interval of the saving.
        margin_ns: the smallest saving that counts.
        verdict: faster, slower or tie.
    """

    a: Timing
    b: Timing
    saving_ns: int
    spread_ns: int
    margin_ns: int
    verdict: Verdict

    @property
    def b_faster(self) -> bool:
        """Whether B beats A beyond the spread and the margin."""
        return self.verdict is Verdict.FASTER

    @property
    def b_slower(self) -> bool:
        """Whether B loses to A beyond the spread."""
        return self.verdict is Verdict.SLOWER

    @property
    def speedup(self) -> float:
        """``a.median / b.median`` (above 1: B is faster)."""
        return self.a.median_ns / max(1, self.b.median_ns)

    @property
    def speedup_se(self) -> float:
        """Standard error of :attr:`speedup` (first-order propagation of both medians')."""
        a, b = max(1, self.a.median_ns), max(1, self.b.median_ns)
        return self.speedup * math.hypot(self.a.median_se_ns / a, self.b.median_se_ns / b)

    def describe(self) -> str:
        """The medians, the saving and its spread, in words (milliseconds)."""
        return (
            f"{self.b.median_ns / 1e6:.4g} ms against {self.a.median_ns / 1e6:.4g} ms (saving "
            f"{self.saving_ns / 1e6:.4g} ± {self.spread_ns / 1e6:.2g} ms, {self.b.samples} and "
            f"{self.a.samples} samples)"
        )


def compare(a: Timing, b: Timing, margin: float = 0.0) -> Comparison:
    """Judge B against A.

    Args:
        a: the reference's timing.
        b: the candidate's timing.
        margin: the smallest relative saving worth a change (0.1: 10 % of A's median).
    """
    if not margin >= 0.0:
        raise ConfigError(f"margin must be a fraction >= 0, got {margin!r}")
    saving = a.median_ns - b.median_ns
    spread = difference_spread_ns(a, b)
    margin_ns = margin * a.median_ns
    judged = verdict(saving, spread, margin_ns)
    return Comparison(a, b, saving, round(spread), round(margin_ns), judged)


def compare_samples(a_ns: Sequence[int], b_ns: Sequence[int], margin: float = 0.0) -> Comparison:
    """:func:`compare` of raw samples (at least one of each)."""
    return compare(Timing.of(a_ns), Timing.of(b_ns), margin)

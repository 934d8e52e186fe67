"""The statistic and its rule: a clear win, a tie within the noise, a loss, the margin."""

from __future__ import annotations

import math
import random

import pytest

from codedag.errors import ConfigError
from codedag.measure import (
    Timing,
    Verdict,
    compare,
    compare_samples,
    difference_spread_ns,
    t_critical,
    verdict,
    welch_df,
)


def _noisy(median_ns: int, noise: float, n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [int(median_ns * rng.uniform(1 - noise, 1 + noise)) for _ in range(n)]


def test_timing_summarizes_median_quartiles_and_the_medians_error() -> None:
    t = Timing.of([10, 30, 20, 40, 50])
    assert (t.median_ns, t.samples) == (30, 5)
    assert t.q25_ns <= t.median_ns <= t.q75_ns and t.iqr_ns == t.q75_ns - t.q25_ns
    assert t.median_se_ns == pytest.approx(1.2533 * t.iqr_ns / 1.349 / math.sqrt(5))
    assert Timing.from_dict(t.to_dict()) == t
    assert Timing.of_seconds([0.001, 0.002, 0.003]).median_ns == 2_000_000
    assert Timing.of([5, 1]).q25_ns == 1  # fewer than 4 samples: the extremes
    with pytest.raises(ValueError, match="at least one"):
        Timing.of([])


def test_t_critical_values_follow_the_table_and_tend_to_the_normal() -> None:
    assert t_critical(1) == pytest.approx(12.706)
    assert t_critical(10) == pytest.approx(2.228)
    assert 1.96 < t_critical(200) < 1.98
    assert t_critical(float("inf")) == pytest.approx(1.96)


def test_the_spread_is_a_95_percent_interval_that_shrinks_with_samples() -> None:
    few = difference_spread_ns(
        Timing.of(_noisy(1000, 0.2, 5, 0)), Timing.of(_noisy(900, 0.2, 5, 1))
    )
    many = difference_spread_ns(
        Timing.of(_noisy(1000, 0.2, 200, 0)), Timing.of(_noisy(900, 0.2, 200, 1))
    )
    assert few > 2 * many > 0
    a, b = Timing.of(_noisy(1000, 0.2, 200, 2)), Timing.of(_noisy(900, 0.2, 200, 3))
    se = math.hypot(a.median_se_ns, b.median_se_ns)
    assert difference_spread_ns(a, b) == pytest.approx(t_critical(welch_df(a, b)) * se)
    assert 1.9 < difference_spread_ns(a, b) / se < 2.05  # about 2 standard errors
    exact = Timing.of([1000] * 8)
    assert difference_spread_ns(exact, exact) == 0 and welch_df(exact, exact) == math.inf


def test_a_clear_win_a_tie_within_the_noise_and_a_loss() -> None:
    win = compare_samples(_noisy(1000, 0.1, 20, 0), _noisy(500, 0.1, 20, 1))
    assert win.verdict is Verdict.FASTER and win.b_faster and win.speedup == pytest.approx(2, 0.1)
    assert win.saving_ns > win.spread_ns > 0 and win.speedup_se > 0
    tie = compare_samples(_noisy(1000, 0.5, 8, 2), _noisy(970, 0.5, 8, 3))
    assert tie.verdict is Verdict.TIE and not tie.b_faster and not tie.b_slower
    assert abs(tie.saving_ns) <= tie.spread_ns
    loss = compare_samples(_noisy(1000, 0.1, 20, 4), _noisy(3000, 0.1, 20, 5))
    assert loss.verdict is Verdict.SLOWER and loss.b_slower
    assert "ms against" in loss.describe()


def test_a_win_smaller_than_the_margin_is_a_tie() -> None:
    a, b = Timing.of([1000] * 6), Timing.of([970] * 6)  # 3 % faster, no noise at all
    assert compare(a, b, margin=0.0).verdict is Verdict.FASTER
    assert compare(a, b, margin=0.05).verdict is Verdict.TIE
    assert compare(a, Timing.of([700] * 6), margin=0.05).verdict is Verdict.FASTER
    assert compare(a, a).verdict is Verdict.TIE  # equal: no saving to speak of
    with pytest.raises(ConfigError, match="margin"):
        compare(a, b, margin=-0.1)


def test_the_rule_on_sums() -> None:
    """Callers that add up several calls' savings and spreads judge the sums by the same rule."""
    assert verdict(100, 50, 80) is Verdict.FASTER
    assert verdict(100, 150, 0) is Verdict.TIE  # within the spread
    assert verdict(100, 0, 100) is Verdict.TIE  # not beyond the margin
    assert verdict(-100, 50) is Verdict.SLOWER
    assert verdict(-100, 150) is Verdict.TIE

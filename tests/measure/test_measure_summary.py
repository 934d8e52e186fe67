"""Samples summarized: median and quartiles, the median's standard error from the quartiles,
and a checked round trip through plain data."""

from __future__ import annotations

import math

import pytest

from codedag.measure.summary import IQR_PER_SIGMA, MEDIAN_SE_FACTOR, Timing, nanoseconds


def test_quartiles_with_few_and_many_samples() -> None:
    assert Timing.of([30, 10, 20]) == Timing(20, 10, 30, 3)  # extremes below four samples
    many = Timing.of([10, 20, 30, 40, 50, 60, 70, 80, 90])
    assert (many.median_ns, many.q25_ns, many.q75_ns, many.samples) == (50, 30, 70, 9)
    assert many.iqr_ns == 40 and many.relative_spread == pytest.approx(0.8)
    expected = MEDIAN_SE_FACTOR * (40 / IQR_PER_SIGMA) / math.sqrt(9)
    assert many.median_se_ns == pytest.approx(expected)
    with pytest.raises(ValueError, match="at least one sample"):
        Timing.of([])


def test_seconds_are_kept_to_the_nanosecond() -> None:
    assert Timing.of_seconds([0.0000015, 0.000002]).median_ns == 1750


def test_plain_data_round_trips_and_bad_figures_are_refused() -> None:
    timing = Timing(100, 90, 120, 5)
    assert Timing.from_dict(timing.to_dict()) == timing
    with pytest.raises(ValueError, match="inconsistent timing"):
        Timing.from_dict({"median_ns": 100, "q25_ns": 110, "q75_ns": 120, "samples": 5})
    with pytest.raises(ValueError, match="inconsistent timing"):
        Timing.from_dict({**timing.to_dict(), "samples": 0})
    assert nanoseconds(3.0) == 3
    for bad in (True, -1, 1.5, float("nan"), float("inf"), "3"):
        with pytest.raises(ValueError, match="whole number"):
            nanoseconds(bad)
    assert Timing(0, 0, 0, 1).relative_spread == 0.0

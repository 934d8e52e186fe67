"""The prefix cache store's costs: interpolation by size, and one small measurement."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from codedag.calibrate.store_costs import StoreCosts, measure_store


def test_no_measurement_costs_nothing() -> None:
    assert StoreCosts()(1000) == (0, 0)


def test_measured_sizes_are_returned_exactly_and_between_them_interpolated() -> None:
    costs = StoreCosts(sizes=[100, 300], read_ns=[10, 30], write_ns=[100, 500])
    assert costs(100) == (10, 100)
    assert costs(300) == (30, 500)
    assert costs(200) == (20, 300)


def test_outside_the_measured_sizes_times_scale_with_size() -> None:
    costs = StoreCosts(sizes=[100, 300], read_ns=[10, 30], write_ns=[100, 500])
    assert costs(50) == (5, 50)  # below the smallest: scaled from it
    assert costs(600) == (60, 1000)  # above the largest: scaled from it
    single = StoreCosts(sizes=[1000], read_ns=[40], write_ns=[80])
    assert single(2000) == (80, 160)


def test_measure_store_times_each_distinct_positive_size_once() -> None:
    costs = measure_store([4096, 0, 1024, 4096, -5], repeats=2)
    assert costs.sizes == [1024, 4096]
    assert len(costs.read_ns) == len(costs.write_ns) == 2
    assert all(ns > 0 for ns in (*costs.read_ns, *costs.write_ns))
    assert costs.where


def test_a_larger_value_never_costs_less(monkeypatch: pytest.MonkeyPatch) -> None:
    # medians measured on a busy machine: the second size read faster than the first
    medians = iter([900, 300, 800, 100, 2000, 400])  # write, read per size

    def timed(_function: Any, **_options: Any) -> SimpleNamespace:
        return SimpleNamespace(median_ns=next(medians))

    monkeypatch.setattr("codedag.calibrate.store_costs.time_one", timed)
    costs = measure_store([1024, 2048, 4096])
    assert costs.write_ns == [900, 900, 2000] and costs.read_ns == [300, 300, 400]

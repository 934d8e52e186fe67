"""The wrapper's own cost per call, measured: extra work shows as extra nanoseconds per call,
no extra work as (close to) none, and the figures are measured once per device."""

from __future__ import annotations

import pytest

from codedag.calibrate.dispatch import _extra_per_call_ns, _noop, measure_dispatch
from codedag.calibrate.measurement import DispatchCost


def _busy(x: object) -> object:
    total = 0
    for i in range(400):  # tens of microseconds: far above any timing noise
        total += i
    return x


def test_extra_work_per_call_is_what_is_measured() -> None:
    extra = _extra_per_call_ns(_noop, _busy, 0, calls=50)
    assert extra > 2_000
    assert _extra_per_call_ns(_busy, _noop, 0, calls=50) == 0  # never below zero


@pytest.mark.slow
def test_the_real_wrapper_costs_are_measured_once() -> None:
    cost = measure_dispatch("cpu")
    assert isinstance(cost, DispatchCost)
    assert cost.migrated_ns >= 0 and cost.passthrough_ns >= 0
    assert measure_dispatch("cpu") is cost

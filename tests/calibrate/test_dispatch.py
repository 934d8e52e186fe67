"""The wrapper's own cost per call, measured: extra work shows as extra nanoseconds per call,
no extra work as (close to) none, and the figures are measured once per device."""

from __future__ import annotations

import numpy as np
import pytest

from codedag.calibrate.dispatch import _extra_per_call_ns, _noop, dispatch_ways, measure_dispatch
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


def test_the_passed_through_way_runs_the_original_and_the_migrated_way_the_backend(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The pass-through figure is the cost of a call the plan keeps: the kept way hands the
    value to the do-nothing original as it is (a migrated call returns the backend's copy),
    and finds its caller's placement once, as for any caller a plan names (a caller the plan
    did not name was measured instead: its frames walked at every call, 13 us a call)."""
    import codedag.migrate.wrapper as wrapper
    from codedag.calibrate.dispatch import _loop

    value = np.zeros(4, np.float32)
    direct, migrated, kept = dispatch_ways("cpu")
    assert kept(value) is value
    assert migrated(value) is not value and direct(value) is not value
    named: list[object] = []

    def counted(frame: object) -> str:
        named.append(frame)
        return frame_name(frame)  # type: ignore[arg-type]

    frame_name = wrapper.frame_name
    monkeypatch.setattr(wrapper, "frame_name", counted)
    _loop(kept, value, 300)()
    assert 0 < len(named) < 30  # the first call's walk only

"""The tracer's calibrated per-event costs: measured once per setting, then cached; every cost
is a finite non-negative time, and following lines adds a per-line cost."""

from __future__ import annotations

import math

from codedag.trace.costs import Calibration
from codedag.trace.overhead import calibration
from codedag.trace.records import KIND_C, KIND_PY, KIND_WRAPPED


def test_a_calibration_is_measured_once_per_setting_and_its_costs_are_times() -> None:
    first = calibration(track_memory=False)
    assert calibration(track_memory=False) is first
    assert isinstance(first, Calibration)
    for name, value in first.to_dict().items():
        assert math.isfinite(value) and value >= 0, name
    for kind in (KIND_PY, KIND_WRAPPED, KIND_C):
        assert first.per_record(kind) >= 0
    assert first.line_ns == 0.0  # no line events without line-level tracing
    assert calibration(track_memory=False, line_level=True) is not first

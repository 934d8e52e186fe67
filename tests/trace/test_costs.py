"""Cost accounting: the tracer's own time, memory per call in both modes, total and self times
with the tracer's cost subtracted."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
import pytest

import codedag.trace.records as records
from codedag.trace.costs import (
    ZERO,
    Calibration,
    CostModel,
    Meter,
    PerCallMemory,
    WindowMemory,
    memory_meter,
)
from codedag.trace.records import (
    INFO,
    KIND,
    KIND_C,
    KIND_PY,
    KIND_STEP,
    KIND_WRAPPED,
    MEM,
    MEMORY_OFF,
    MEMORY_PER_CALL,
    MEMORY_WINDOW,
    NFIELDS,
    PARENT,
    SEQ,
    T0,
    T1,
)


def record(seq: int, parent: int, kind: int, t0: int, t1: int, **fields: int) -> list[Any]:
    rec: list[Any] = [0] * NFIELDS
    rec[SEQ], rec[PARENT], rec[KIND], rec[T0], rec[T1] = seq, parent, kind, t0, t1
    for name, value in fields.items():
        rec[getattr(records, name)] = value
    return rec


def test_meter_charges_the_tracer_time() -> None:
    now = iter([150, 400])
    meter = Meter(clock=lambda: next(now))
    assert meter.charge(100) == 50
    assert meter.charge(300, 350) == 100
    assert meter.charge(390) == 110


def test_memory_meter_by_mode() -> None:
    assert memory_meter(MEMORY_OFF) is None
    assert isinstance(memory_meter(MEMORY_PER_CALL), PerCallMemory)
    assert isinstance(memory_meter(MEMORY_WINDOW), WindowMemory)


def test_per_call_memory_measures_c_calls_and_carries_them_to_the_caller() -> None:
    assert not tracemalloc.is_tracing()
    meter = PerCallMemory()
    stack: list[list[Any]] = []
    caller = record(0, -1, KIND_PY, 0, 0)
    meter.push(caller, stack, meter.mark())
    call = record(1, 0, KIND_WRAPPED, 0, 0)
    meter.push(call, stack, meter.mark())
    assert tracemalloc.is_tracing()  # a session of its own around the C-level call
    kept = np.ones(100_000)  # 800 kB kept
    temporary = np.ones(200_000)  # 1.6 MB freed before the call ends
    del temporary
    net = meter.measure(call)
    assert not tracemalloc.is_tracing()
    stack.pop()
    meter.settle(call, stack, net)
    assert 1_600_000 <= call[MEM] < 2_600_000
    assert 800_000 <= net < 900_000
    meter.measure(caller)  # a Python call's peak is what its callees imply
    assert caller[MEM] == call[MEM]
    del kept


def test_window_memory_subtracts_the_tracer_own_allocations() -> None:
    tracemalloc.start()
    try:
        meter = WindowMemory()
        stack: list[list[Any]] = []
        rec = record(0, -1, KIND_PY, 0, 0)
        meter.push(rec, stack, meter.mark())
        m0 = meter.mark()
        tracer_own = [0] * 50_000  # allocated by the tracer's bookkeeping
        meter.own(m0)
        data = np.ones(100_000)
        stack.pop()
        meter.settle(rec, stack, meter.measure(rec))
        assert 800_000 <= rec[MEM] < 1_000_000
        del tracer_own, data
    finally:
        tracemalloc.stop()


def test_times_subtract_measured_and_calibrated_costs() -> None:
    cal = Calibration(skip_ns=10.0, kept_py_ns=0.0, kept_wrapped_ns=100.0, line_ns=5.0)
    calls = [
        record(0, -1, KIND_PY, 0, 10_000, OV0=0, OV1=1_000, SKIP0=0, SKIP1=20, NL0=0, NL1=40),
        record(1, 0, KIND_WRAPPED, 2_000, 5_000, OV0=200, OV1=500),
        record(2, 0, KIND_C, 6_000, 7_000),
    ]
    totals, selfs = CostModel(cal).times(calls, {})
    assert totals[1:] == [2_700, 1_000]
    # 10 us - 1 us hook time - 20 skipped x 10 - 40 lines x 5 - 100 for the wrapped call
    assert totals[0] == 10_000 - 1_000 - 200 - 200 - 100
    assert selfs == [totals[0] - 3_700, 2_700, 1_000]


def test_self_time_never_negative_and_steps_share_their_statement_by_bytes() -> None:
    calls = [
        record(0, -1, KIND_PY, 0, 1_000),
        record(1, 0, KIND_C, 0, 2_000),  # a callee longer than its caller (clock noise)
        record(2, 0, KIND_STEP, 100, 700, INFO=0),
        record(3, 0, KIND_STEP, 100, 700, INFO=0),
    ]
    calls[2][INFO] = calls[3][INFO] = ((0, 0), ())
    totals, selfs = CostModel(ZERO).times(calls, {2: 300, 3: 100})
    assert totals[0] >= totals[1] and min(selfs) >= 0
    calls[1][T1] = 100
    totals, selfs = CostModel(ZERO).times(calls, {2: 300, 3: 100})
    assert totals[2:] == [450, 150]  # 600 ns of statement shared 3:1
    assert selfs[0] == totals[0] - 100 - 600


@pytest.mark.parametrize(
    ("kind", "field"),
    [(KIND_PY, "kept_py_ns"), (KIND_WRAPPED, "kept_wrapped_ns"), (KIND_C, "kept_c_ns")],
)
def test_calibration_per_record(kind: int, field: str) -> None:
    cal = Calibration(**{field: 7.0})
    assert cal.per_record(kind) == 7.0
    assert cal.per_record(KIND_STEP) == 0.0
    assert cal.to_dict()[field] == 7.0

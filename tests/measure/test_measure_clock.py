"""Timing one call: the device is synchronized before the clock starts and before it stops,
and the CPU time is read only with a CPU clock."""

from __future__ import annotations

import pytest

from codedag.measure.clock import Stopwatch, Timed, no_sync


class Script:
    """Fake clocks and a fake sync that log the order of events."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.wall = 0
        self.cpu = 0

    def sync(self) -> None:
        self.events.append("sync")

    def clock(self) -> int:
        self.events.append("clock")
        self.wall += 100
        return self.wall

    def cpu_clock(self) -> int:
        self.events.append("cpu")
        self.cpu += 7
        return self.cpu

    def work(self) -> str:
        self.events.append("work")
        self.wall += 1000  # the call itself
        return "done"


def test_a_sample_is_the_whole_call_between_two_syncs() -> None:
    s = Script()
    elapsed = Stopwatch(sync=s.sync, clock=s.clock)(s.work)
    assert s.events == ["sync", "clock", "work", "sync", "clock"]
    assert elapsed == 1100  # the call plus one clock step


def test_timed_keeps_the_result_and_the_cpu_time_when_asked() -> None:
    s = Script()
    timed = Stopwatch(sync=s.sync, clock=s.clock, cpu_clock=s.cpu_clock).timed(s.work)
    assert timed == Timed("done", 1100, 7)
    assert s.events == ["sync", "cpu", "clock", "work", "sync", "clock", "cpu"]
    assert Stopwatch(clock=Script().clock).timed(lambda: 1).cpu_ns is None


def test_errors_of_the_call_propagate_and_the_default_sync_does_nothing() -> None:
    def boom() -> None:
        raise RuntimeError("call failed")

    with pytest.raises(RuntimeError, match="call failed"):
        Stopwatch().timed(boom)
    assert no_sync() is None
    assert Stopwatch()(lambda: None) >= 0

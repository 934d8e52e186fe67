"""A tracing window: it installs its event source on start, is the active session while open,
and on stop restores the previous hooks, session and GC settings and closes what is open."""

from __future__ import annotations

import gc
import sys

import numpy as np
from trace_core import core_session

from codedag.trace.recorder import Session, active_session
from codedag.trace.records import NAME, T1


def _work(x: np.ndarray) -> np.ndarray:
    return np.flip(x)


def test_a_window_is_active_while_open_and_restores_everything_when_stopped() -> None:
    s = core_session(use_monitoring=False)
    image = np.ones(3)
    threshold = gc.get_threshold()
    previous_profile = sys.getprofile()
    s.start()
    try:
        assert active_session() is s and sys.getprofile() is s.profile
        if s.freeze_gc:
            assert gc.get_threshold()[0] >= threshold[0]
        _work(image)
    finally:
        s.stop()
    assert active_session() is None and sys.getprofile() is previous_profile
    assert gc.get_threshold() == threshold
    assert [r[NAME] for r in s.calls] == [f"{__name__}._work", "numpy.flip"]
    assert s.t_stop_ns > s.t_start_ns > 0
    assert s.tracker.live == {}  # no object is kept alive past the window


def test_nested_windows_hand_the_active_session_back() -> None:
    outer = core_session(use_monitoring=False)
    inner = core_session(use_monitoring=False)
    outer.start()
    try:
        inner.start()
        try:
            assert active_session() is inner
        finally:
            inner.stop()
        assert active_session() is outer and sys.getprofile() is outer.profile
    finally:
        outer.stop()
    assert active_session() is None


def test_a_record_still_open_at_stop_is_closed_at_the_stop_time() -> None:
    s = core_session(use_monitoring=False)

    def stops_inside() -> None:
        s.stop()

    s.start()
    stops_inside()
    (rec,) = [r for r in s.calls if r[NAME].endswith("stops_inside")]
    assert rec[T1] == s.t_stop_ns and s.stack == []


def test_line_level_is_switched_off_when_another_trace_function_owns_settrace() -> None:
    previous = sys.gettrace()

    def other(frame, event, arg):  # type: ignore[no-untyped-def]
        return None

    sys.settrace(other)
    try:
        s = core_session(use_monitoring=False, line_level=True)
    finally:
        sys.settrace(previous)
    assert isinstance(s, Session)
    assert not s.line_level and "another trace function" in (s.line_level_off_reason or "")

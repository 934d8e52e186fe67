"""A window's state: its memory mode, its settings' defaults, and stopping after an internal
error."""

from __future__ import annotations

import sys
import tracemalloc

from codedag.trace.filter import FunctionFilter
from codedag.trace.records import MEMORY_OFF, MEMORY_PER_CALL, MEMORY_WINDOW
from codedag.trace.session_state import SessionState, no_trace


def state(track_memory: bool = False, **kwargs: object) -> SessionState:
    return SessionState(FunctionFilter(), 8, track_memory, **kwargs)  # type: ignore[arg-type]


def test_the_memory_mode_follows_the_setting_and_whether_tracemalloc_already_runs() -> None:
    assert state().memory_mode == MEMORY_OFF
    assert not tracemalloc.is_tracing()
    assert state(True).memory_mode == MEMORY_PER_CALL
    tracemalloc.start()
    try:
        assert state(True).memory_mode == MEMORY_WINDOW
    finally:
        tracemalloc.stop()


def test_unset_limits_mean_no_limit_and_the_records_start_empty() -> None:
    s = state(prune_after=None, idle_lines=None)
    assert (s.prune_after, s.idle_lines) == (0, 0)
    assert s.calls == s.values == s.uses == s.produces == s.stack == []
    assert s.sequence.take() == 0 and s.sequence.next == 1
    assert not s.broken and s.error is None


def test_a_failure_is_noted_and_removes_the_hooks() -> None:
    s = state()
    previous = sys.gettrace()  # a coverage tool's, if any
    sys.settrace(no_trace)
    sys.setprofile(lambda *a: None)
    try:
        s.fail(ValueError("bad record"))
        assert sys.getprofile() is None and sys.gettrace() is None
    finally:
        sys.setprofile(None)
        sys.settrace(previous)
    assert s.broken and s.error == "ValueError: bad record"


def test_the_global_trace_function_gives_frames_no_local_one() -> None:
    assert no_trace(sys._getframe(), "call", None) is None

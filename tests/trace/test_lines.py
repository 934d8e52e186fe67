"""Following the statements of user frames: line events counted, a statement that raised makes
no step, and a function whose statements never make steps stops being followed."""

from __future__ import annotations

import contextlib
import sys

import numpy as np
from trace_core import core_session, finished_frame, traced

from codedag.trace.lines import LineFollower
from codedag.trace.records import KIND, KIND_PY, KIND_STEP, LINES, NAME
from codedag.trace.steps import ST_FAILED


def _with_failure(x):  # type: ignore[no-untyped-def]
    y = x * 2
    with contextlib.suppress(NameError):
        w = y + undefined_name  # type: ignore[name-defined]  # noqa: F821, F841
    return y


def _pure_loop(n: int) -> int:
    total = 0
    for i in range(n):
        total += i
    return total


def test_a_statement_that_raised_makes_no_step_and_lines_are_counted() -> None:
    s = traced(_with_failure, np.ones(3), line_level=True)
    steps = [r[NAME] for r in s.calls if r[KIND] == KIND_STEP]
    assert steps == ["operator.mul"]  # not operator.add: that statement raised
    assert s.meter.lines >= 4


def test_a_function_without_steps_stops_being_followed_after_idle_lines() -> None:
    s = traced(_pure_loop, 200, line_level=True, idle_lines=3)
    assert s.lines_stopped == [f"{__name__}._pure_loop"]
    assert s.meter.lines < 20  # not one per iteration


def test_the_line_hook_is_given_to_followed_frames_only_when_the_function_has_statements() -> None:
    s = core_session(line_level=True)
    follower: LineFollower = s.lines
    frame = sys._getframe()
    rec = s.recorder.enter(s.meter.clock(), "t", None, KIND_PY, None, [], [], frame, 0)
    previous = frame.f_trace
    try:
        follower.follow(rec, frame, frame.f_code)
        assert rec[LINES] is not None and frame.f_trace is follower.hook
    finally:
        frame.f_trace = previous
    assert follower.frame_record(frame) is rec
    follower.failed(frame)
    assert rec[LINES][ST_FAILED] is True
    namespace: dict = {}
    exec("def made():\n    return 1\n", namespace)
    made = namespace["made"].__code__
    other = s.recorder.enter(s.meter.clock(), "m", None, KIND_PY, None, [], [], "f", 0)
    follower.follow(other, finished_frame(0), made)  # no source: nothing to follow
    assert other[LINES] is None
    s.recorder.close_open(0)

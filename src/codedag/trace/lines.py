"""Following the statements of user frames: where one ends, the next starts (line events).

The tracer's hooks (:mod:`codedag.trace.hooks`) give every recorded user frame a line state (its
record's ``LINES`` field, ``ST_*`` indices in :mod:`codedag.trace.steps`). A line event on the
first line of a statement (and on its first instruction: a statement spanning several lines
revisits its first line) ends the running statement, whose steps are made then
(:meth:`~codedag.trace.steps.StepMaker.finish`), and starts the next one. Line events come from
a local trace function on Python 3.11 (``frame.f_trace``) and from ``sys.monitoring`` LINE
events enabled on the followed code objects on 3.12+. A function whose statements made no step
for ``idle_lines`` of them stops being followed.
"""

from __future__ import annotations

import sys
import types
from collections.abc import Callable
from typing import Any, NamedTuple

from codedag.trace.records import FRAME, LINES, NAME
from codedag.trace.statements import NO_STATEMENTS
from codedag.trace.steps import (
    ST_CALLS0,
    ST_CODE,
    ST_CURRENT,
    ST_FAILED,
    ST_NL0,
    ST_OV0,
    ST_SEQ0,
    ST_SKIP0,
    ST_SNAP,
    ST_START,
    ST_T0,
)


class LineHandlers(NamedTuple):
    """The statement-following functions of one session."""

    line: Callable[[types.FrameType, int], bool]
    returns: Callable[[types.FrameType, int, Any], None]
    failed: Callable[[types.FrameType], None]
    follow_with_trace: Callable[[types.FrameType, types.CodeType], None]
    follow_with_monitoring: Callable[[types.FrameType, types.CodeType], None]


def make_line_follower(
    *,
    session: Any,
    stack: list[list[Any]],
    calls: list[list[Any]],
    statement_cache: dict[types.CodeType, Any],
    line_codes: set[types.CodeType],
    idle_lines: int,
    finish: Callable[..., bool],
    snapshot: Callable[..., Any],
    fail: Callable[[Exception], None],
    counters: tuple[Callable[[], int], ...],
    count_line: Callable[[], None],
    charge: Callable[..., int],
) -> LineHandlers:
    """The line handlers of a session.

    Args:
        session: the session (its monitoring tool, the functions whose lines stopped).
        stack, calls: the session's open records and all records.
        statement_cache: statements by code object (a function stopped gets none).
        line_codes: code objects with sys.monitoring LINE events on.
        idle_lines: statements without a step after which a function stops being followed.
        finish, snapshot: the step maker's.
        fail: stops tracing after an internal error.
        counters: ``(sequence number, skipped events, tracer time, line events)`` readers.
        count_line: counts a line event.
        charge: ``charge(h0, t=now)`` adds ``t - h0`` to the tracer's own time and returns the
            new total.
    """
    current_seq, skipped, overhead, line_count = counters
    perf = session.clock
    line_stats: dict[types.CodeType, list[Any]] = {}  # [statements ended, steps made]

    def frame_record(frame: types.FrameType) -> list[Any] | None:
        rec = stack[-1] if stack else None
        if rec is None or rec[FRAME] is not frame:
            for candidate in reversed(stack):
                if candidate[FRAME] is frame:
                    return candidate
            return None
        return rec

    def line(frame: types.FrameType, h0: int) -> bool:
        """A line event of a followed frame: a statement may end and another start.

        Returns whether the line can start a statement (others may be switched off).
        """
        rec = frame_record(frame)
        state = rec[LINES] if rec is not None else None
        if state is None:
            charge(h0)
            return True
        code_statements = state[ST_CODE]
        stmt = code_statements.by_line.get(frame.f_lineno)
        if stmt is None:
            charge(h0)
            return False
        if stmt is state[ST_CURRENT] and frame.f_lasti != state[ST_START]:
            charge(h0)
            return True  # back on the first line of a statement spanning several lines
        current = state[ST_CURRENT]
        if current is not None and rec is not None:
            stats = line_stats.get(frame.f_code)
            if stats is None:
                stats = line_stats[frame.f_code] = [0, False]
            stats[0] += 1
            if current.active and not state[ST_FAILED]:
                timing = (h0, overhead(), skipped(), line_count())
                if finish(rec, state, frame, timing):
                    stats[1] = True
            if stats[0] >= idle_lines and not stats[1]:
                stop(frame, rec)
                charge(h0)
                return False
        state[ST_CURRENT] = stmt
        state[ST_START] = code_statements.line_start[stmt.line]
        state[ST_FAILED] = False
        state[ST_SNAP] = snapshot(stmt, frame) if stmt.snapshot else None
        state[ST_CALLS0], state[ST_SEQ0] = len(calls), current_seq()
        state[ST_SKIP0], state[ST_NL0] = skipped(), line_count()
        t = perf()
        state[ST_OV0] = charge(h0, t)  # the tracer's time up to t, where the statement starts
        state[ST_T0] = t
        return True

    def stop(frame: types.FrameType, rec: list[Any]) -> None:
        """Stop following a function whose statements never make steps (a pure-Python loop)."""
        code = frame.f_code
        statement_cache[code] = NO_STATEMENTS
        rec[LINES] = None
        session.lines_stopped.append(rec[NAME])
        if session.monitoring_tool is not None:
            vars(sys)["monitoring"].set_local_events(session.monitoring_tool, code, 0)
            line_codes.discard(code)
        else:
            frame.f_trace_lines = False

    def returns(frame: types.FrameType, h0: int, arg: Any) -> None:
        """The frame returns: its last statement (``return expr``) ends."""
        rec = frame_record(frame)
        state = rec[LINES] if rec is not None else None
        if state is None or rec is None:
            return
        current = state[ST_CURRENT]
        if current is not None and current.active and not state[ST_FAILED]:
            finish(rec, state, frame, (h0, overhead(), skipped(), line_count()), arg)
        state[ST_CURRENT] = None

    def failed(frame: types.FrameType) -> None:
        rec = frame_record(frame)
        if rec is not None and rec[LINES] is not None:
            rec[LINES][ST_FAILED] = True

    def line_hook(frame: types.FrameType, event: str, arg: Any) -> Any:
        """Local trace function of followed user frames (Python 3.11)."""
        count_line()
        h0 = perf()
        try:
            if event == "line":
                line(frame, h0)  # it adds its own time to the tracer's
                return line_hook
            if event == "return":
                returns(frame, h0, arg)
            elif event == "exception":
                failed(frame)
        except Exception as error:  # never let the hook raise: Python would drop it
            fail(error)
        charge(h0)
        return line_hook

    def follow_with_trace(frame: types.FrameType, code: types.CodeType) -> None:
        frame.f_trace = line_hook

    def follow_with_monitoring(frame: types.FrameType, code: types.CodeType) -> None:
        if code not in line_codes and session.monitoring_tool is not None:
            line_codes.add(code)
            monitoring = vars(sys)["monitoring"]
            monitoring.set_local_events(session.monitoring_tool, code, monitoring.events.LINE)

    return LineHandlers(line, returns, failed, follow_with_trace, follow_with_monitoring)

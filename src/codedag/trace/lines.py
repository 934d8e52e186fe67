"""Following the statements of user frames: where one ends, the next starts (line events).

Every recorded user frame gets a line state (its record's ``LINES`` field, ``ST_*`` indices in
:mod:`codedag.trace.steps`). A line event on the first line of a statement (and on its first
instruction: a statement spanning several lines revisits its first line) ends the running
statement, whose steps are made then (:meth:`~codedag.trace.steps.StepMaker.finish`), and
starts the next one. Line events come from a local trace function on Python 3.11
(``frame.f_trace``, :func:`make_line_hook`) and from ``sys.monitoring`` LINE events enabled on
the followed code objects on 3.12+. A function whose statements made no step for
``idle_lines`` of them stops being followed.
"""

from __future__ import annotations

import inspect
import sys
import types
from collections.abc import Callable
from typing import Any

from codedag.trace.costs import Meter
from codedag.trace.records import FRAME, LINES, NAME
from codedag.trace.session_state import SessionState
from codedag.trace.statements import NO_STATEMENTS, CodeStatements, statements_of
from codedag.trace.steps import (
    ST_CALLS0,
    ST_CODE,
    ST_CURRENT,
    ST_EARLY,
    ST_FAILED,
    ST_NL0,
    ST_OV0,
    ST_SEQ0,
    ST_SKIP0,
    ST_SNAP,
    ST_START,
    ST_STATS,
    ST_T0,
    StepMaker,
)

LineHook = Callable[[types.FrameType, str, Any], Any]
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class LineFollower:
    """Follows the statements of recorded user frames and has their steps made.

    Args:
        state: the window (its open records, its ``sys.monitoring`` tool, the functions whose
            statements are no longer followed).
        meter: the tracer's own costs (line events are counted there).
        steps: makes the steps of a finished statement.
    """

    def __init__(self, state: SessionState, meter: Meter, steps: StepMaker) -> None:
        self.state = state
        self.meter = meter
        self.clock = meter.clock
        self.steps = steps
        self.stack = state.stack
        self.calls = state.calls
        self.idle_lines = state.idle_lines or sys.maxsize
        # by id(code): (code, its statements; NO_STATEMENTS once stopped, [statements ended,
        # steps made]); holding the code keeps its id its own
        self.statements: dict[int, tuple[types.CodeType, CodeStatements, list[Any]]] = {}
        self.hook = make_line_hook(self)

    def follow(self, rec: list[Any], frame: types.FrameType, code: types.CodeType) -> None:
        """Follow the statements of a newly recorded user frame (when it has any)."""
        known = self.statements.get(id(code))
        if known is None:
            c0 = self.clock()
            known = self.statements[id(code)] = (code, statements_of(code), [0, False])
            self.meter.charge(c0)
        statements = known[1]
        if not statements.by_line:
            return
        rec[LINES] = [statements, None, 0, 0, 0, 0, 0, 0, None, 0, False, known[2], None]
        tool = self.state.monitoring_tool
        if tool is None:
            frame.f_trace = self.hook
        elif id(code) not in self.state.line_codes:
            self.state.line_codes[id(code)] = code
            monitoring = vars(sys)["monitoring"]
            monitoring.set_local_events(tool, code, monitoring.events.LINE)

    def frame_record(self, frame: types.FrameType) -> list[Any] | None:
        """The open record of ``frame`` (usually the innermost)."""
        stack = self.stack
        if stack and stack[-1][FRAME] is frame:
            return stack[-1]
        for candidate in reversed(stack):
            if candidate[FRAME] is frame:
                return candidate
        return None

    def line(self, frame: types.FrameType, h0: int) -> bool:
        """A line event of a followed frame: a statement may end and another start.

        Returns whether the line can start a statement (others may be switched off).
        """
        rec = self.frame_record(frame)
        state = rec[LINES] if rec is not None else None
        if rec is None or state is None:
            self.meter.charge(h0)
            return True
        statements = state[ST_CODE]
        stmt = statements.by_line.get(frame.f_lineno)
        if stmt is None:
            self.meter.charge(h0)
            return False
        if stmt is state[ST_CURRENT] and frame.f_lasti != state[ST_START]:
            self.meter.charge(h0)
            return True  # back on the first line of a statement spanning several lines
        current = state[ST_CURRENT]
        ending = current is not None and current.active and not state[ST_FAILED]
        local = frame.f_locals if ending or stmt.snapshot else None  # copies every local
        if current is not None and not self._ended(rec, state, frame, h0, local):
            self.meter.charge(h0)
            return False
        meter, sequence = self.meter, self.state.sequence
        state[ST_CURRENT] = stmt
        state[ST_START] = statements.line_start[stmt.line]
        state[ST_FAILED] = False
        state[ST_EARLY] = None
        state[ST_SNAP] = self.steps.snapshot(stmt, frame, local) if local is not None else None
        state[ST_CALLS0], state[ST_SEQ0] = len(self.calls), sequence.next
        state[ST_SKIP0], state[ST_NL0] = meter.skipped, meter.lines
        t = self.clock()
        state[ST_OV0] = meter.charge(h0, t)  # the tracer's time up to t, where it starts
        state[ST_T0] = t
        return True

    def _ended(
        self,
        rec: list[Any],
        state: list[Any],
        frame: types.FrameType,
        h0: int,
        local: dict[str, Any] | None,
    ) -> bool:
        """The running statement ended: make its steps (``local``: the frame's locals when it
        can make any). Returns False when the function stops being followed (its statements
        made no step for ``idle_lines`` of them)."""
        stats = state[ST_STATS]
        stats[0] += 1
        if local is not None and state[ST_CURRENT].active and not state[ST_FAILED]:
            meter = self.meter
            timing = (h0, meter.overhead_ns, meter.skipped, meter.lines)
            if self.steps.finish(rec, state, frame, timing, local):
                stats[1] = True
        if stats[0] >= self.idle_lines and not stats[1]:
            self.stop(frame, rec)
            return False
        return True

    def stop(self, frame: types.FrameType, rec: list[Any]) -> None:
        """Stop following a function whose statements never make steps (a pure-Python loop)."""
        code = frame.f_code
        self.statements[id(code)] = (code, NO_STATEMENTS, rec[LINES][ST_STATS])
        rec[LINES] = None
        self.state.lines_stopped.append(rec[NAME])
        if self.state.monitoring_tool is not None:
            self.forget_code(code)
        else:
            frame.f_trace_lines = False

    def forget_code(self, code: types.CodeType) -> None:
        """No more ``sys.monitoring`` LINE events for ``code``."""
        state = self.state
        if state.line_codes.pop(id(code), None) is not None:
            vars(sys)["monitoring"].set_local_events(state.monitoring_tool, code, 0)

    def returns(self, frame: types.FrameType, h0: int, arg: object) -> None:
        """The frame returns: its last statement (``return expr``) ends."""
        rec = self.frame_record(frame)
        state = rec[LINES] if rec is not None else None
        if rec is None or state is None:
            return
        current = state[ST_CURRENT]
        if current is not None and current.active and not state[ST_FAILED]:
            meter = self.meter
            timing = (h0, meter.overhead_ns, meter.skipped, meter.lines)
            self.steps.finish(rec, state, frame, timing, frame.f_locals, arg)
        state[ST_CURRENT] = None
        state[ST_EARLY] = None

    def entering(self, frame: types.FrameType, code: types.CodeType, h0: int) -> None:
        """A user function's frame starts: when the running statement of its caller computes
        the call's arguments, make their steps now (before the function's own)."""
        stack = self.stack
        if not stack:
            return
        rec = stack[-1]
        state = rec[LINES]
        if state is None:
            return
        stmt = state[ST_CURRENT]
        if stmt is None or code.co_name not in stmt.calls or state[ST_FAILED]:
            return
        if code.co_flags & _RESUMABLE:
            return  # its frame starts (and resumes) after the call that made it
        caller = frame.f_back
        if caller is None or rec[FRAME] is not caller:
            return
        meter = self.meter
        timing = (h0, meter.overhead_ns, meter.skipped, meter.lines)
        self.steps.before_call(rec, state, caller, frame, timing)

    def failed(self, frame: types.FrameType) -> None:
        """The frame's running statement raised: it makes no step."""
        rec = self.frame_record(frame)
        if rec is not None and rec[LINES] is not None:
            rec[LINES][ST_FAILED] = True


def make_line_hook(follower: LineFollower) -> LineHook:
    """The local trace function of followed user frames (Python 3.11)."""
    line, returns, failed = follower.line, follower.returns, follower.failed
    meter, clock, fail = follower.meter, follower.clock, follower.state.fail

    def line_hook(frame: types.FrameType, event: str, arg: object) -> Any:
        meter.lines += 1
        h0 = clock()
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
        meter.overhead_ns += clock() - h0
        return line_hook

    return line_hook

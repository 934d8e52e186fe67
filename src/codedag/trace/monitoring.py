"""The tracer's event source on Python 3.12+: ``sys.monitoring`` (PEP 669).

Compared with ``sys.setprofile`` (Python 3.11), events go straight to the callbacks (no frame
conversion per event), and a callback can switch its event off where it happened
(``sys.monitoring.DISABLE``): code the tracer never records (the standard library, codedag
itself, excluded packages) and call sites of such code cost nothing after their first event.
Line events are enabled only on the code objects of followed user frames
(``set_local_events``). The callbacks are built by :func:`codedag.trace.hooks.make_hooks`.

Limits: a disabled event stays off for the rest of the window, so a call site that first calls a
Python function and later a C function (``fn = ops[i]; fn(x)``) reports only the first kind.
``sys.monitoring`` events are process-wide; callbacks ignore other threads. A window opened
inside another codedag window takes over the same tool id and hands it back when it closes.
"""

from __future__ import annotations

import sys
import threading
import types
from collections.abc import Callable
from typing import Any, NamedTuple

from codedag.errors import TraceError
from codedag.trace.records import FRAME, IMPORT, LIB, LINES
from codedag.trace.session_state import SessionState

TOOL_NAME = "codedag"
# The events every window listens to (C_RETURN and C_RAISE come with CALL; EXCEPTION_HANDLED
# cannot be set per code object).
GLOBAL_EVENTS = (
    "PY_START",
    "PY_RESUME",
    "PY_THROW",
    "PY_RETURN",
    "PY_YIELD",
    "PY_UNWIND",
    "CALL",
    "EXCEPTION_HANDLED",
)
# Tool ids tried in order: the profiler's first, then the ones PEP 669 leaves free.
_CANDIDATE_IDS = (2, 3, 4, 5)
# Sessions holding the tool, innermost last: (session, tool id, previous callbacks, events).
_holders: list[tuple[Any, int, dict[str, Any], int]] = []


class Unavailable(TraceError):
    """``sys.monitoring`` cannot be used now (no free tool id)."""


def monitoring_available() -> bool:
    """Whether this interpreter has ``sys.monitoring`` (Python 3.12+)."""
    return "monitoring" in vars(sys)


def api() -> Any:
    """The ``sys.monitoring`` namespace (Python 3.12+)."""
    return vars(sys)["monitoring"]


def _event(name: str) -> int:
    return int(getattr(api().events, name))


def _tool_id() -> tuple[int, bool]:
    """``(tool id, whether this call acquired it)``: an outer codedag window's, or a free one."""
    if _holders:
        return _holders[-1][1], False
    monitoring = api()
    for tool in _CANDIDATE_IDS:
        if monitoring.get_tool(tool) is None:
            monitoring.use_tool_id(tool, TOOL_NAME)
            return tool, True
    raise Unavailable(f"sys.monitoring tool ids {_CANDIDATE_IDS} are all in use")


def start(session: SessionState) -> None:
    """Register the session's callbacks and switch its events on."""
    monitoring = api()
    tool, acquired = _tool_id()
    previous_events = monitoring.get_events(tool)
    previous: dict[str, Any] = {}
    for name, callback in session.monitoring_callbacks.items():
        previous[name] = monitoring.register_callback(tool, _event(name), callback)
    _holders.append((session, tool, previous, previous_events if not acquired else -1))
    session.monitoring_tool = tool
    # Events switched off in an earlier window (another filter, calibration) come back.
    monitoring.restart_events()
    mask = 0
    for name in GLOBAL_EVENTS:
        mask |= _event(name)
    monitoring.set_events(tool, mask)


def stop(session: SessionState) -> None:
    """Switch the session's events off and give the tool back (or to the outer window)."""
    monitoring = api()
    entry = next((h for h in reversed(_holders) if h[0] is session), None)
    if entry is None:
        return
    _holders.remove(entry)
    _, tool, previous, previous_events = entry
    for code in session.line_codes:
        monitoring.set_local_events(tool, code, 0)
    session.line_codes.clear()
    session.monitoring_tool = None
    if previous_events == -1:  # acquired by this session
        monitoring.set_events(tool, 0)
        for name in previous:
            monitoring.register_callback(tool, _event(name), None)
        monitoring.free_tool_id(tool)
        return
    for name, callback in previous.items():  # an outer window takes over again
        monitoring.register_callback(tool, _event(name), callback)
    monitoring.set_events(tool, previous_events)
    monitoring.restart_events()


class EventHandlers(NamedTuple):
    """What the ``sys.monitoring`` callbacks share with the tracer's hooks (see hooks.py)."""

    session: Any
    stack: list[list[Any]]
    importing: list[types.FrameType]
    code_cache: dict[types.CodeType, Any]
    max_depth: int
    line_level: bool
    perf: Callable[[], int]
    frame_info: Callable[..., Any]
    record_py: Callable[..., None]
    py_return: Callable[..., None]
    c_info: Callable[..., Any]
    record_c: Callable[..., None]
    c_return: Callable[..., None]
    line: Callable[..., bool]
    statement_returns: Callable[..., None]
    statement_failed: Callable[..., None]
    skip: Callable[[], None]
    fail: Callable[[Exception], None]
    count_line: Callable[[], None]
    charge: Callable[..., int]


def monitoring_callbacks(h: EventHandlers) -> dict[str, Callable[..., Any]]:
    """The callbacks of one session, by event name.

    Callbacks get the code object and an offset; the frame is their caller's. Events of code the
    tracer never records are switched off where they happen (``DISABLE``). Events are global in
    ``sys.monitoring``: other threads' events are ignored, never disabled (the location may
    matter to the traced thread).
    """
    monitoring = api()
    disable, missing = monitoring.DISABLE, monitoring.MISSING
    get_frame = sys._getframe
    get_ident = threading.get_ident
    session, stack, importing, code_cache = h.session, h.stack, h.importing, h.code_cache
    thread, max_depth, line_level, perf = session.thread, h.max_depth, h.line_level, h.perf
    frame_info, record_py, py_return = h.frame_info, h.record_py, h.py_return
    c_info, record_c, c_return = h.c_info, h.record_c, h.c_return
    line, statement_returns, statement_failed = h.line, h.statement_returns, h.statement_failed
    skip, fail, count_line, charge = h.skip, h.fail, h.count_line, h.charge
    function_type = types.FunctionType
    c_types = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)

    def m_start(code: types.CodeType, offset: int, *exc: Any) -> Any:  # PY_START/RESUME/THROW
        h0 = perf()
        if get_ident() != thread or session.broken:
            return None
        try:
            frame = get_frame(1)
            info = frame_info(code, frame)
            if info is None:
                skip()
                return disable if not exc else None
            if importing or info is IMPORT:
                if info is IMPORT:
                    importing.append(frame)
                skip()
                return None
            if stack and (
                (info[1] is not None and stack[-1][LIB] == info[1]) or len(stack) >= max_depth
            ):
                skip()
                return None
            record_py(frame, code, info, h0)
        except Exception as error:
            fail(error)
        return None

    def m_return(code: types.CodeType, offset: int, retval: Any) -> Any:  # PY_RETURN/YIELD
        h0 = perf()
        if get_ident() != thread or session.broken:
            return None
        try:
            frame = get_frame(1)
            if code_cache.get(code, False) is None and not (stack and stack[-1][FRAME] is frame):
                skip()
                return disable
            if line_level and stack and stack[-1][FRAME] is frame and stack[-1][LINES]:
                statement_returns(frame, h0, retval)
                charge(h0)  # the statement's end is tracer time
                h0 = 0
            py_return(frame, retval, h0)
        except Exception as error:
            fail(error)
        return None

    def m_unwind(code: types.CodeType, offset: int, exc: Any) -> None:  # PY_UNWIND
        if get_ident() != thread or session.broken:
            return
        try:
            py_return(get_frame(1), None)
        except Exception as error:
            fail(error)

    def m_call(code: types.CodeType, offset: int, func: Any, arg0: Any) -> Any:  # CALL
        h0 = perf()
        if get_ident() != thread or session.broken:
            return None
        try:
            if code_cache.get(code, False) is None or type(func) is function_type:
                return disable  # calls made by skipped code; Python callees report PY_START
            if not isinstance(func, c_types):
                return disable  # classes, ufuncs, dispatchers: no C call of their own (as 3.11)
            owner = getattr(func, "__self__", None)
            if owner is None and arg0 is not missing:
                objclass = getattr(func, "__objclass__", None)  # img.astype(...) in 3.12
                if objclass is not None and isinstance(arg0, objclass):
                    owner = arg0
            info = c_info(func, owner)
            if info is None:
                skip()
                return disable
            if importing or (stack and (stack[-1][LIB] == info[1] or len(stack) >= max_depth)):
                skip()
                return None
            record_c(get_frame(1), func, info, owner, h0)
        except Exception as error:
            fail(error)
        return None

    def m_c_return(code: types.CodeType, offset: int, func: Any, arg0: Any) -> None:
        h0 = perf()
        if get_ident() != thread or session.broken:
            return
        try:
            c_return(func, h0)
        except Exception as error:
            fail(error)

    def m_line(code: types.CodeType, line_number: int) -> Any:  # LINE (user code only)
        if get_ident() != thread or session.broken:
            return None
        count_line()
        h0 = perf()
        try:
            if not line(get_frame(1), h0):
                return disable  # not where a statement starts: never needed again
        except Exception as error:
            fail(error)
        return None

    def m_handled(code: types.CodeType, offset: int, exc: Any) -> None:  # EXCEPTION_HANDLED
        if get_ident() == thread and not session.broken:
            statement_failed(get_frame(1))

    return {
        "PY_START": m_start,
        "PY_RESUME": m_start,
        "PY_THROW": m_start,
        "PY_RETURN": m_return,
        "PY_YIELD": m_return,
        "PY_UNWIND": m_unwind,
        "CALL": m_call,
        "C_RETURN": m_c_return,
        "C_RAISE": m_c_return,
        "LINE": m_line,
        "EXCEPTION_HANDLED": m_handled,
    }

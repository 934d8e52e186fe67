"""The tracer's event source on Python 3.12+: ``sys.monitoring`` (PEP 669).

Compared with ``sys.setprofile`` (Python 3.11), events go straight to the callbacks (no frame
conversion per event), and a callback can switch its event off where it happened
(``sys.monitoring.DISABLE``): code the tracer never records (the standard library, codedag
itself, excluded packages) and call sites of such code cost nothing after their first event.
Line events are enabled only on the code objects of followed user frames
(``set_local_events``). The callbacks (:func:`monitoring_callbacks`) hand what they record to
the :class:`~codedag.trace.calls.CallRecorder` and the
:class:`~codedag.trace.lines.LineFollower`, as the 3.11 profile hook does.

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
from typing import Any

from codedag.errors import TraceError
from codedag.trace.calls import CallRecorder
from codedag.trace.classify import WRAPPER, Classifier
from codedag.trace.costs import Meter
from codedag.trace.lines import LineFollower
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


def tool_available() -> bool:
    """Whether a window could take a tool id now (an outer codedag window's, or a free one)."""
    if not monitoring_available():
        return False
    return bool(_holders) or any(api().get_tool(tool) is None for tool in _CANDIDATE_IDS)


def start(session: SessionState, callbacks: dict[str, Callable[..., Any]]) -> None:
    """Register the session's callbacks and switch its events on."""
    monitoring = api()
    tool, acquired = _tool_id()
    previous_events = monitoring.get_events(tool)
    previous: dict[str, Any] = {}
    for name, callback in callbacks.items():
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
    for code in session.line_codes.values():
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


Callbacks = dict[str, Callable[..., Any]]


def monitoring_callbacks(recorder: CallRecorder) -> Callbacks:
    """The callbacks of one window, by event name: they drive ``recorder`` and its session's
    meter, classifier and line follower.

    Callbacks get the code object and an offset; the frame is their caller's. Events of code the
    tracer never records are switched off where they happen (``DISABLE``). Events are global in
    ``sys.monitoring``: other threads' events are ignored, never disabled (the location may
    matter to the traced thread).
    """
    state, meter, classifier = recorder.state, recorder.meter, recorder.classifier
    callbacks = _call_callbacks(state, meter, classifier, recorder)
    callbacks.update(_return_callbacks(state, meter, classifier, recorder, recorder.lines))
    return callbacks


def _call_callbacks(
    state: SessionState, meter: Meter, classifier: Classifier, recorder: CallRecorder
) -> Callbacks:
    """PY_START (and RESUME, THROW) and CALL: what to record as it starts."""
    m_start = _start_callback(state, meter, classifier, recorder)
    m_call = _c_call_callback(state, meter, classifier, recorder)
    return {"PY_START": m_start, "PY_RESUME": m_start, "PY_THROW": m_start, "CALL": m_call}


def _start_callback(
    state: SessionState, meter: Meter, classifier: Classifier, recorder: CallRecorder
) -> Callable[..., Any]:
    disable, get_frame, get_ident, clock = (
        api().DISABLE,
        sys._getframe,
        threading.get_ident,
        meter.clock,
    )
    thread, stack, importing, max_depth = (
        state.thread,
        state.stack,
        state.importing,
        state.max_depth,
    )
    code_cache, classify_code, fail = classifier.code_cache, classifier.code, state.fail
    record_py, record_wrapped = recorder.record_py, recorder.record_wrapped

    def m_start(code: types.CodeType, offset: int, *exc: Any) -> Any:
        h0 = clock()
        if get_ident() != thread or state.broken:
            return None
        try:
            frame = get_frame(1)
            info = code_cache.get(id(code), False)
            if info is False:
                info = classify_code(code, frame)
            if info is None:
                meter.skipped += 1
                return disable if not exc else None
            if importing or info is IMPORT:
                if info is IMPORT:
                    importing.append(frame)
                meter.skipped += 1
            elif stack and (
                (info[1] is not None and stack[-1][LIB] == info[1]) or len(stack) >= max_depth
            ):
                meter.skipped += 1
            elif info[3] is WRAPPER:
                record_wrapped(frame, info, h0)
            else:
                record_py(frame, code, info, h0)
        except Exception as error:
            fail(error)
        return None

    return m_start


def _c_call_callback(
    state: SessionState, meter: Meter, classifier: Classifier, recorder: CallRecorder
) -> Callable[..., Any]:
    disable, missing = api().DISABLE, api().MISSING
    get_frame, get_ident, clock = sys._getframe, threading.get_ident, meter.clock
    thread, stack, importing, max_depth = (
        state.thread,
        state.stack,
        state.importing,
        state.max_depth,
    )
    code_cache, classify_c, record_c, fail = (
        classifier.code_cache,
        classifier.c_function,
        recorder.record_c,
        state.fail,
    )
    function_type = types.FunctionType
    c_types = (types.BuiltinFunctionType, types.MethodDescriptorType, types.WrapperDescriptorType)

    def m_call(code: types.CodeType, offset: int, func: object, arg0: object) -> Any:
        h0 = clock()
        if get_ident() != thread or state.broken:
            return None
        try:
            caller = code_cache.get(id(code), False)
            if caller is None or type(func) is function_type:
                return disable  # calls made by skipped code; Python callees report PY_START
            if caller is not False and caller[3] is WRAPPER:
                return disable  # the original, called by its recording wrapper
            if not isinstance(func, c_types):
                return disable  # classes, ufuncs, dispatchers: no C call of their own (as 3.11)
            owner = getattr(func, "__self__", None)
            if owner is None and arg0 is not missing:
                objclass = getattr(func, "__objclass__", None)  # img.astype(...) in 3.12
                if objclass is not None and isinstance(arg0, objclass):
                    owner = arg0
            info = classify_c(func, owner)
            if info is None:
                meter.skipped += 1
                return disable
            if importing or (stack and (stack[-1][LIB] == info[1] or len(stack) >= max_depth)):
                meter.skipped += 1
                return None
            record_c(get_frame(1), func, info, owner, h0)
        except Exception as error:
            fail(error)
        return None

    return m_call


def _return_callbacks(
    state: SessionState,
    meter: Meter,
    classifier: Classifier,
    recorder: CallRecorder,
    lines: LineFollower,
) -> Callbacks:
    """PY_RETURN (and YIELD, UNWIND), C_RETURN (and C_RAISE), LINE and EXCEPTION_HANDLED."""
    disable, get_frame, get_ident, clock = (
        api().DISABLE,
        sys._getframe,
        threading.get_ident,
        meter.clock,
    )
    thread, stack, code_cache, fail = state.thread, state.stack, classifier.code_cache, state.fail
    returned, c_returned = recorder.returned, recorder.c_returned
    line, statement_returns, statement_failed = lines.line, lines.returns, lines.failed

    def m_return(code: types.CodeType, offset: int, retval: object) -> Any:
        h0 = clock()
        if get_ident() != thread or state.broken:
            return None
        try:
            frame = get_frame(1)
            top = stack[-1] if stack else None
            if code_cache.get(id(code), False) is None and not (top and top[FRAME] is frame):
                meter.skipped += 1
                return disable
            if state.line_level and top and top[FRAME] is frame and top[LINES]:
                statement_returns(frame, h0, retval)
                meter.charge(h0)  # the statement's end is tracer time
                h0 = 0
            returned(frame, retval, h0)
        except Exception as error:
            fail(error)
        return None

    def m_unwind(code: types.CodeType, offset: int, exc: object) -> None:
        if get_ident() == thread and not state.broken:
            try:
                returned(get_frame(1), None)
            except Exception as error:
                fail(error)

    def m_c_return(code: types.CodeType, offset: int, func: object, arg0: object) -> None:
        h0 = clock()
        if get_ident() == thread and not state.broken:
            try:
                c_returned(func, h0)
            except Exception as error:
                fail(error)

    def m_line(code: types.CodeType, line_number: int) -> Any:  # LINE (user code only)
        if get_ident() != thread or state.broken:
            return None
        meter.lines += 1
        h0 = clock()
        try:
            if not line(get_frame(1), h0):
                return disable  # not where a statement starts: never needed again
        except Exception as error:
            fail(error)
        return None

    def m_handled(code: types.CodeType, offset: int, exc: object) -> None:  # EXCEPTION_HANDLED
        if get_ident() == thread and not state.broken:
            statement_failed(get_frame(1))

    return {
        "PY_RETURN": m_return,
        "PY_YIELD": m_return,
        "PY_UNWIND": m_unwind,
        "C_RETURN": m_c_return,
        "C_RAISE": m_c_return,
        "LINE": m_line,
        "EXCEPTION_HANDLED": m_handled,
    }

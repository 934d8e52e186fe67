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
from typing import TYPE_CHECKING, Any

from codedag.errors import TraceError

if TYPE_CHECKING:
    from codedag.trace.recorder import Session

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


def start(session: Session) -> None:
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


def stop(session: Session) -> None:
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

"""The tracer's core built the way a window builds it, with a clock that ticks by a fixed step
(every clock read advances it), so the tracer's cost accounting is exact in tests."""

from __future__ import annotations

import sys
import types
from typing import Any

from codedag.trace.filter import FunctionFilter
from codedag.trace.recorder import Session
from codedag.trace.value_nodes import DataTypes

TICK_NS = 100


class TickClock:
    """A nanosecond clock that advances by ``step`` at every read."""

    def __init__(self, step: int = TICK_NS) -> None:
        self.now = 0
        self.step = step
        self.reads = 0

    def __call__(self) -> int:
        self.now += self.step
        self.reads += 1
        return self.now


def core_session(**kwargs: Any) -> Session:
    """A window that is built but not started (nothing installed), ticking clock by default."""
    options: dict[str, Any] = {
        "function_filter": FunctionFilter(),
        "max_depth": 8,
        "track_memory": False,
        "data_types": DataTypes(),
        "clock": TickClock(),
    }
    options.update(kwargs)
    return Session(**options)


def finished_frame(*args: Any) -> types.FrameType:
    """The frame of a finished call of a small user function (its locals stay readable)."""

    def user_step(image: Any, k: int = 3) -> types.FrameType:
        return sys._getframe()

    return user_step(*args)


def traced(fn: Any, *args: Any, **kwargs: Any) -> Session:
    """A finished window around ``fn(*args)`` (``kwargs``: the window's settings)."""
    session = core_session(use_monitoring=False, **kwargs)
    session.start()
    try:
        fn(*args)
    finally:
        session.stop()
    return session

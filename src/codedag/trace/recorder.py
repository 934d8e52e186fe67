"""A tracing window: the session that holds the raw records and installs the event source.

The hooks themselves are in :mod:`codedag.trace.hooks` (closures over the session's records)
and the ``sys.monitoring`` plumbing of Python 3.12+ in :mod:`codedag.trace.monitoring`. Nothing
here builds graph objects: the :class:`~codedag.trace.builder.DAGBuilder` turns the records
into an ExecutionDAG after the window.

Dataflow is tracked by object identity. Every tracked object is held through a weak reference
whose callback drops its entry when the object dies, or by a strong reference when the type does
not support weak references (tuples, lists, dicts), so a recycled ``id()`` never matches a dead
value.
"""

from __future__ import annotations

import gc
import logging
import os
import sys
import threading
import tracemalloc
from typing import Any

import codedag.trace.monitoring as monitoring
from codedag.trace.hooks import make_hooks, no_trace
from codedag.trace.records import MEMORY_PER_CALL
from codedag.trace.session_state import SessionState

log = logging.getLogger(__name__)

_active: Session | None = None  # the innermost session; library wrappers report to it
_active_lock = threading.Lock()


def active_session() -> Session | None:
    """The innermost running session (any thread), or None."""
    return _active


class Session(SessionState):
    """One tracing window: its state (:class:`~codedag.trace.session_state.SessionState`, whose
    arguments it takes) with the hooks built, and the window's start and stop."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.use_monitoring = self.use_monitoring and monitoring.monitoring_available()
        make_hooks(self)

    # ------------------------------------------------------------------ window
    def start(self) -> None:
        """Make this the active session and install its event source on this thread."""
        global _active
        _register_fork_handler()
        with _active_lock:
            self._previous_active = _active
            _active = self
        self._previous_profile = sys.getprofile()
        self._previous_trace = sys.gettrace()
        if self.line_level and not self.use_monitoring and self._previous_trace is not None:
            self.line_level = False  # a debugger or coverage tool owns sys.settrace
            self.line_level_off_reason = "another trace function (debugger, coverage) is set"
            make_hooks(self)
        self.t_start_ns = self.clock()
        if self.use_monitoring:
            try:
                monitoring.start(self)
            except monitoring.Unavailable as error:  # every tool id taken: the 3.11 way
                log.info("sys.monitoring unavailable (%s): using sys.setprofile", error)
                self.use_monitoring = False
                make_hooks(self)
        if not self.use_monitoring:
            if self.line_level:
                sys.settrace(no_trace)
            sys.setprofile(self.profile)

    def stop(self) -> None:
        """Remove the event source, restore the previous hooks and active session; close
        unfinished records."""
        global _active
        if self.use_monitoring:
            monitoring.stop(self)
        else:
            sys.setprofile(self._previous_profile)
            if self.line_level:
                sys.settrace(self._previous_trace)
        self.t_stop_ns = self.clock()
        with _active_lock:
            _active = self._previous_active
        self.close_open(self.t_stop_ns)
        if self.broken and self.memory_mode == MEMORY_PER_CALL and tracemalloc.is_tracing():
            tracemalloc.stop()  # a failure may have left a per-call session open
        if self.freeze_gc:
            gc.unfreeze()
        self.live.clear()


_fork_handler_registered = False


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader worker) inherits the hook of the forking thread: drop it."""
    global _active
    if _active is not None:
        if _active.use_monitoring:
            monitoring.stop(_active)
        _active = None
        sys.setprofile(None)
        if sys.gettrace() is no_trace:
            sys.settrace(None)


def _register_fork_handler() -> None:
    global _fork_handler_registered
    if not _fork_handler_registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_fork_in_child)
        _fork_handler_registered = True

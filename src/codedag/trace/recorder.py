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
import time
import tracemalloc
import types
from collections.abc import Callable
from typing import Any

from codedag.trace import monitoring
from codedag.trace.filter import FunctionFilter, callable_info, code_info
from codedag.trace.hooks import make_hooks, no_trace
from codedag.trace.monitoring import monitoring_available
from codedag.trace.records import MEMORY_OFF, MEMORY_PER_CALL, MEMORY_WINDOW
from codedag.trace.values import DataTypes

log = logging.getLogger(__name__)

_active: Session | None = None  # the innermost session; library wrappers report to it
_active_lock = threading.Lock()


def active_session() -> Session | None:
    """The innermost running session (any thread), or None."""
    return _active


class Session:
    """One tracing window: configuration, raw records and the hook closures.

    Args:
        function_filter: decides which calls are recorded.
        max_depth: calls nested deeper than this (0 = outermost) are not recorded.
        track_memory: measure the peak traced-memory increase of each call.
        data_types: which values become value nodes.
        user_codes: code objects always treated as user code (calibration uses this).
        line_level: follow the statements of user frames (operators, subscripts, methods
            become steps; see :mod:`codedag.trace.steps`).
        use_monitoring: on Python 3.12+, take events from ``sys.monitoring`` (cheaper: code
            the tracer skips stops reporting); else from ``sys.setprofile``.
        prune_after: stop recording a Python function after this many calls if none of them
            touched a data value (None: record every call).
        idle_lines: stop following the statements of a function after this many without a
            step (None: follow them all).
        clock: the clock of every timestamp (nanoseconds); calibration uses the thread's CPU
            time, which a busy machine's preemption does not inflate.
    """

    # set by codedag.trace.hooks.make_hooks
    profile: Callable[[types.FrameType, str, Any], None]
    call_wrapped: Callable[..., Any]
    counters: Callable[[], tuple[int, int, int]]
    line_events: Callable[[], int]
    close_open: Callable[[int], None]
    code_cache: dict[types.CodeType, Any]

    def __init__(
        self,
        function_filter: FunctionFilter,
        max_depth: int,
        track_memory: bool,
        data_types: DataTypes,
        user_codes: frozenset[types.CodeType] = frozenset(),
        line_level: bool = False,
        use_monitoring: bool = True,
        prune_after: int | None = None,
        idle_lines: int | None = None,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        self.filter = function_filter
        self.max_depth = max_depth
        self.track_memory = track_memory
        if not track_memory:
            self.memory_mode = MEMORY_OFF
        elif tracemalloc.is_tracing():
            self.memory_mode = MEMORY_WINDOW
        else:
            self.memory_mode = MEMORY_PER_CALL
        self.data_types = data_types
        self.user_codes = user_codes
        self.line_level = line_level
        self.line_level_off_reason: str | None = None
        self.clock = clock
        self.prune_after = prune_after or 0
        self.idle_lines = idle_lines or 0
        self.pruned: list[str] = []  # functions no longer recorded (never touched data)
        self.lines_stopped: list[str] = []  # functions whose statements are no longer followed
        self.thread = threading.get_ident()
        self.calls: list[list[Any]] = []
        self.values: list[list[Any]] = []
        self.uses: list[tuple[int, int]] = []
        self.produces: list[tuple[int, int]] = []
        self.stack: list[list[Any]] = []
        self.live: dict[int, tuple[Any, int, int, Any]] = {}
        self.error: str | None = None
        self.broken = False
        self.t_start_ns = 0
        self.t_stop_ns = 0
        # Hundreds of thousands of records make every full GC pass slower (traced code slows
        # down quadratically). The records are moved to the permanent generation every 64
        # calls with gc.freeze() and back with gc.unfreeze() at the end of the window, unless
        # the process already uses gc.freeze() itself.
        self.freeze_gc = gc.get_freeze_count() == 0
        # Python 3.12+: sys.monitoring (PEP 669) instead of sys.setprofile/sys.settrace
        self.use_monitoring = use_monitoring and monitoring_available()
        self.monitoring_tool: int | None = None
        self.monitoring_callbacks: dict[str, Any] = {}
        self.line_codes: set[types.CodeType] = set()
        make_hooks(self)

    # ------------------------------------------------------------------ classification
    def _classify_code(self, code: types.CodeType, frame: types.FrameType) -> Any:
        info = code_info(self.filter, code, frame, self.user_codes)
        self.code_cache[code] = info
        return info

    def _classify_c(self, func: Any) -> Any:
        return callable_info(self.filter, func)

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

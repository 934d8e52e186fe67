"""A tracing window: the session that builds the tracer's core and installs its event source.

A :class:`Session` is complete when constructed: around its state
(:class:`~codedag.trace.session_state.SessionState`) it builds the cost meter, the value
tracker, the classifier, the call recorder, the step maker and line follower, and the event
handlers of both sources (the ``sys.setprofile`` hook of :mod:`codedag.trace.hooks`, the
``sys.monitoring`` callbacks of :mod:`codedag.trace.monitoring`); :meth:`Session.start` installs
one of them and :meth:`Session.stop` removes it. Nothing here builds graph objects: the
:class:`~codedag.trace.builder.DAGBuilder` turns the records into an ExecutionDAG after the
window.
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import time
import tracemalloc
import types
from collections.abc import Callable

import codedag.trace.monitoring as monitoring
from codedag.trace.calls import CallRecorder
from codedag.trace.capture import ArgumentCapture
from codedag.trace.classify import Classifications, Classifier
from codedag.trace.costs import Meter, memory_meter
from codedag.trace.filter import FunctionFilter
from codedag.trace.hooks import make_profile_hook
from codedag.trace.identity import ValueTracker
from codedag.trace.lines import LineFollower
from codedag.trace.records import MEMORY_PER_CALL
from codedag.trace.session_state import GC_WINDOW_THRESHOLD, SessionState, no_trace
from codedag.trace.steps import StepMaker
from codedag.trace.value_nodes import DataTypes
from codedag.util import forks

log = logging.getLogger(__name__)

_active: Session | None = None  # the innermost session
_active_lock = threading.Lock()


def active_session() -> Session | None:
    """The innermost running session (any thread), or None; a forked child drops it."""
    return _active


class Session(SessionState):
    """One tracing window: its state, the core that records into it, and its start and stop.

    Args:
        function_filter: decides which calls are recorded.
        max_depth: calls nested deeper than this (0 = outermost) are not recorded.
        track_memory: measure the peak traced-memory increase of each call.
        data_types: which values become value nodes.
        user_codes: code objects always treated as user code (calibration uses this).
        line_level: follow the statements of user frames (steps).
        use_monitoring: on Python 3.12+, take events from ``sys.monitoring`` (cheaper: code
            the tracer skips stops reporting); else from ``sys.setprofile``.
        prune_after: stop recording a Python function after this many calls if none of them
            touched a data value (None: record every call).
        idle_lines: stop following the statements of a function after this many without a
            step (None: follow them all).
        clock: the clock of every timestamp (nanoseconds); calibration uses the thread's CPU
            time, which a busy machine's preemption does not inflate.
        classifications: classification results to share with other windows (default: this
            window's own).
    """

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
        classifications: Classifications | None = None,
    ) -> None:
        super().__init__(
            function_filter, max_depth, track_memory, line_level, prune_after, idle_lines
        )
        self.use_monitoring = use_monitoring and monitoring.tool_available()
        if self.line_level and not self.use_monitoring and sys.gettrace() is not None:
            self._line_level_off()
        self.meter = Meter(clock)
        self.tracker = ValueTracker(self.values, self.sequence, data_types)
        self.classifier = Classifier(
            classifications or Classifications(function_filter, user_codes), self.meter
        )
        self.steps = StepMaker(self, self.tracker, self.classifier.skipped)
        self.lines = LineFollower(self, self.meter, self.steps)
        self.recorder = CallRecorder(
            self,
            self.meter,
            self.tracker,
            ArgumentCapture(self.tracker),
            self.classifier,
            memory_meter(self.memory_mode),
            self.lines,
        )
        self.profile = make_profile_hook(self, self.meter, self.classifier, self.recorder)
        self.monitoring_callbacks = (
            monitoring.monitoring_callbacks(self.recorder)
            if monitoring.monitoring_available()
            else {}
        )

    def _line_level_off(self) -> None:
        self.line_level = False  # a debugger or coverage tool owns sys.settrace
        self.line_level_off_reason = "another trace function (debugger, coverage) is set"

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
        self._gc_threshold = gc.get_threshold()
        if self.freeze_gc and self._gc_threshold[0] < GC_WINDOW_THRESHOLD:
            gc.set_threshold(GC_WINDOW_THRESHOLD, *self._gc_threshold[1:])
        self.t_start_ns = self.meter.clock()
        if self.use_monitoring:
            try:
                monitoring.start(self, self.monitoring_callbacks)
            except monitoring.Unavailable as error:  # every tool id taken: the 3.11 way
                log.info("sys.monitoring unavailable (%s): using sys.setprofile", error)
                self.use_monitoring = False
                if self.line_level and self._previous_trace is not None:
                    self._line_level_off()
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
            _restore_profile(self._previous_profile)
            if self.line_level:
                sys.settrace(self._previous_trace)
        self.t_stop_ns = self.meter.clock()
        with _active_lock:
            _active = self._previous_active
        self.recorder.close_open(self.t_stop_ns)
        if self.broken and self.memory_mode == MEMORY_PER_CALL and tracemalloc.is_tracing():
            tracemalloc.stop()  # a failure may have left a per-call session open
        if self.freeze_gc:
            gc.unfreeze()
            if gc.get_threshold() == (GC_WINDOW_THRESHOLD, *self._gc_threshold[1:]):
                gc.set_threshold(*self._gc_threshold)  # unless the traced code changed it
        self.tracker.clear()


def _restore_profile(previous: object) -> None:
    """Give ``sys.setprofile`` back to what held it before the window.

    A profiler written in C (cProfile's) installs its hook with ``enable()`` and shows as its
    object in ``sys.getprofile()``, which is not callable: passed to ``sys.setprofile`` it would
    raise in the traced program's next call, so it is enabled again instead (its counts miss
    the window).
    """
    if previous is None or callable(previous):
        sys.setprofile(previous)
        return
    enable = getattr(previous, "enable", None)
    sys.setprofile(None)
    if callable(enable):
        enable()
    else:
        log.warning("codedag: the profiler %r set before tracing could not be restored", previous)


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
    forks.on_fork(after_in_child=_after_fork_in_child)

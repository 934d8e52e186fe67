"""The state of a tracing window: its configuration, raw records, open calls and status.

Every part of the tracer's core (:mod:`codedag.trace.calls`, :mod:`codedag.trace.lines`, the
event sources in :mod:`codedag.trace.hooks` and :mod:`codedag.trace.monitoring`) reads and
extends it; :class:`~codedag.trace.recorder.Session` builds those parts around it and adds the
window (installing and removing the event source).
"""

from __future__ import annotations

import gc
import logging
import sys
import threading
import tracemalloc
import types
from typing import Any

from codedag.trace.filter import FunctionFilter
from codedag.trace.records import MEMORY_OFF, MEMORY_PER_CALL, MEMORY_WINDOW, Sequence

log = logging.getLogger(__name__)

GC_WINDOW_THRESHOLD = 100_000


def no_trace(frame: types.FrameType, event: str, arg: object) -> None:
    """The global trace function while following lines on Python 3.11: frames get none here.

    ``sys.settrace`` must be set for line events to reach the local trace function the profile
    hook gives user frames (``frame.f_trace``); every other frame gets none.
    """
    return None


class SessionState:
    """One tracing window's configuration, raw records, open calls and status.

    Args:
        function_filter: decides which calls are recorded.
        max_depth: calls nested deeper than this (0 = outermost) are not recorded.
        track_memory: measure the peak traced-memory increase of each call.
        line_level: follow the statements of user frames (operators, subscripts, methods
            become steps; see :mod:`codedag.trace.steps`).
        prune_after: stop recording a Python function after this many calls if none of them
            touched a data value (None: record every call).
        idle_lines: stop following the statements of a function after this many without a
            step (None: follow them all).
    """

    def __init__(
        self,
        function_filter: FunctionFilter,
        max_depth: int,
        track_memory: bool,
        line_level: bool = False,
        prune_after: int | None = None,
        idle_lines: int | None = None,
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
        self.line_level = line_level
        self.line_level_off_reason: str | None = None
        self.prune_after = prune_after or 0
        self.idle_lines = idle_lines or 0
        self.pruned: list[str] = []  # functions no longer recorded (never touched data)
        self.lines_stopped: list[str] = []  # functions whose statements are no longer followed
        self.thread = threading.get_ident()
        # raw records (records.py): calls and steps, values, (value, call) and (call, value)
        self.sequence = Sequence()
        self.calls: list[list[Any]] = []
        self.values: list[list[Any]] = []
        self.uses: list[tuple[int, int]] = []
        self.produces: list[tuple[int, int]] = []
        self.stack: list[list[Any]] = []  # open call records, innermost last
        self.importing: list[types.FrameType] = []  # module bodies running: nothing recorded
        self.error: str | None = None
        self.broken = False
        self.t_start_ns = 0
        self.t_stop_ns = 0
        # Hundreds of thousands of records make every full GC pass slower (traced code slows
        # down quadratically). The records are moved to the permanent generation every 64
        # calls with gc.freeze() and back with gc.unfreeze() at the end of the window, unless
        # the process already uses gc.freeze() itself; in between, the youngest generation is
        # collected only after GC_WINDOW_THRESHOLD new objects (records and values, not
        # garbage: collecting them every 700 was a tenth of a line-level window).
        self.freeze_gc = gc.get_freeze_count() == 0
        # Python 3.12+: sys.monitoring (PEP 669) instead of sys.setprofile/sys.settrace
        self.use_monitoring = False
        self.monitoring_tool: int | None = None  # set while sys.monitoring delivers events
        # code objects with sys.monitoring LINE events on, by id
        self.line_codes: dict[int, types.CodeType] = {}

    def fail(self, error: Exception) -> None:
        """Stop tracing after an internal error: the traced code must never see it."""
        self.error = f"{type(error).__name__}: {error}"
        self.broken = True
        if self.monitoring_tool is None:
            sys.setprofile(None)
            if sys.gettrace() is no_trace:
                sys.settrace(None)
        # sys.monitoring callbacks check self.broken and do nothing from now on
        log.error("tracer failed (%s); tracing stopped early", self.error, exc_info=error)

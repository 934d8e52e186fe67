"""The state of a tracing window: configuration, raw records, and the hooks' entry points.

The hooks (:mod:`codedag.trace.hooks`) and the ``sys.monitoring`` plumbing
(:mod:`codedag.trace.monitoring`) read and extend it; :class:`~codedag.trace.recorder.Session`
adds the window around it (installing and removing the event source).
"""

from __future__ import annotations

import gc
import threading
import time
import tracemalloc
import types
from collections.abc import Callable
from typing import Any

from codedag.trace.filter import FunctionFilter, callable_info, code_info
from codedag.trace.records import MEMORY_OFF, MEMORY_PER_CALL, MEMORY_WINDOW
from codedag.trace.values import DataTypes


class SessionState:
    """One tracing window's configuration, raw records and hook closures (the window itself,
    which installs the hooks, is :class:`~codedag.trace.recorder.Session`).

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
        self.use_monitoring = use_monitoring  # the window keeps it where the interpreter can
        self.monitoring_tool: int | None = None
        self.monitoring_callbacks: dict[str, Any] = {}
        self.line_codes: set[types.CodeType] = set()

    # ------------------------------------------------------------------ classification
    def _classify_code(self, code: types.CodeType, frame: types.FrameType) -> Any:
        info = code_info(self.filter, code, frame, self.user_codes)
        self.code_cache[code] = info
        return info

    def _classify_c(self, func: Any) -> Any:
        return callable_info(self.filter, func)

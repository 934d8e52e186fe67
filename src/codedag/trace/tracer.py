"""EnhancedTracer: trace a data pipeline into an ExecutionDAG, and a decorator form."""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from codedag.errors import ConfigError, TraceError
from codedag.graph.model import ExecutionDAG
from codedag.trace.builder import DAGBuilder, python_info
from codedag.trace.classify import shared_classifications
from codedag.trace.dataloader import trace_first_batch
from codedag.trace.filter import FunctionFilter
from codedag.trace.overhead import ZERO, calibration
from codedag.trace.value_nodes import DataTypes

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])
# Statements of one function followed without a step before its line events stop.
IDLE_LINES = 512


class EnhancedTracer:
    """Record the calls and the dataflow of the code run inside :meth:`tracing_context`.

    Example:
        >>> tracer = EnhancedTracer(max_depth=10, track_memory=True)
        >>> with tracer.tracing_context():  # doctest: +SKIP
        ...     batch = next(iterator)
        >>> dag = tracer.dag_builder.dag  # doctest: +SKIP

    Args:
        max_depth: calls nested deeper than this are not recorded (the outermost is depth 0).
        track_memory: record the peak increase of traced memory (``tracemalloc``) per call.
        filter_config: ``{"include": [...], "exclude": [...], "libraries": [...]}`` module
            prefixes (see :class:`~codedag.trace.filter.FunctionFilter`).
        wrap_libraries: interpose C-level entry points of cv2/numpy for argument/result dataflow.
        wrap: extra qualified names to interpose (e.g. a C extension of your own).
        value_types: extra types whose instances become value nodes.
        calibrate: subtract the tracer's calibrated per-event cost from recorded times.
        line_level: follow the statements of user code: operators (``img / 255.0``), array
            methods, subscripts and slice assignment become steps of the DAG
            (``operator.truediv``, ``numpy.ndarray.astype``, ``operator.setitem``) with their
            time and the values they make. Library code is never followed line by line.
        prune_after: stop recording a Python function after this many calls when none of
            them received or returned a data value or led to one (tokenizers, small helpers
            called in loops); its time stays in its callers' self time. None records every
            call. Statements of a function are no longer followed after 512 of them made no
            step (``None`` here follows them all too).
        clock: the clock of every recorded time, in nanoseconds (default: the wall clock,
            ``time.perf_counter_ns``; ``time.thread_time_ns`` counts only this thread's CPU).
    """

    def __init__(
        self,
        max_depth: int = 10,
        track_memory: bool = True,
        filter_config: dict[str, Iterable[str]] | None = None,
        *,
        wrap_libraries: bool = True,
        wrap: Iterable[str] = (),
        value_types: Iterable[type] = (),
        calibrate: bool = True,
        line_level: bool = True,
        prune_after: int | None = 64,
        clock: Callable[[], int] = time.perf_counter_ns,
    ) -> None:
        if not isinstance(max_depth, int) or max_depth < 1:
            raise ConfigError(f"max_depth must be an integer >= 1, got {max_depth!r}")
        config = dict(filter_config or {})
        unknown = set(config) - {"include", "exclude", "libraries"}
        if unknown:
            raise ConfigError(
                f"filter_config has unknown keys {sorted(unknown)}; "
                "expected include, exclude, libraries"
            )
        self.max_depth = max_depth
        self.track_memory = track_memory
        self.function_filter = FunctionFilter(**config)
        self.wrap_libraries = wrap_libraries
        self.wrap = tuple(wrap)
        self.value_types = tuple(value_types)
        self.calibrate = calibrate
        if prune_after is not None and (not isinstance(prune_after, int) or prune_after < 1):
            raise ConfigError(f"prune_after must be an integer >= 1 or None, got {prune_after!r}")
        self.line_level = line_level
        self.prune_after = prune_after
        self.clock = clock
        self.dag_builder = DAGBuilder()
        self._session: Any = None
        self._patcher: Any = None
        self._nesting = 0
        self._owner_thread: int | None = None
        self._wrapped: list[str] = []
        self._kept_patcher: Any = None

    # ------------------------------------------------------------------ window
    @property
    def dag(self) -> ExecutionDAG:
        """The DAG of the last finished window (same as ``dag_builder.dag``)."""
        return self.dag_builder.dag

    @property
    def is_tracing(self) -> bool:
        """Whether a window is open."""
        return self._session is not None

    def start(self, reach: Iterable[object] = ()) -> None:
        """Open a tracing window on the calling thread (prefer :meth:`tracing_context`).

        Args:
            reach: objects (a data set) whose references to the wrapped library functions are
                pointed at the wrappers for the window, as the pipeline's own modules' are
                (``functools.partial(cv2.resize, ...)`` in a transform list, ``from cv2 import
                resize``): calls through them are recorded with their arguments.
        """
        if self._session is not None:
            if self._owner_thread != threading.get_ident():
                raise TraceError("this tracer is already tracing another thread")
            self._nesting += 1  # re-entering the same tracer continues the same window
            return
        import codedag.trace.interpose as interpose
        from codedag.patching import Patcher
        from codedag.trace.recorder import Session

        line_level = self.line_level and sys.gettrace() is None
        self._calibration = calibration(self.track_memory, line_level) if self.calibrate else ZERO
        classifications = shared_classifications(self.function_filter)
        patcher = self._kept_patcher
        if patcher is None:
            patcher = Patcher(label="codedag.trace", stable_references=True)
            names = self._wrap_targets(classifications.filter)
            self._wrapped = interpose.install(patcher, names, self.function_filter.library_key)
        try:
            interpose.bind_references(patcher, reach)
            session = Session(
                self.function_filter,
                self.max_depth,
                self.track_memory,
                DataTypes(self.value_types),
                line_level=self.line_level,
                prune_after=self.prune_after,
                idle_lines=IDLE_LINES if self.prune_after is not None else None,
                classifications=classifications,
                clock=self.clock,
            )
            session.start()
        except BaseException:
            if patcher is not self._kept_patcher:
                patcher.restore()
            raise
        self._patcher, self._session = patcher, session
        self._owner_thread = threading.get_ident()
        self._t_wall0 = time.time()

    def stop(self) -> ExecutionDAG:
        """Close the window, restore hooks and originals, and build the DAG."""
        session = self._session
        if session is None:
            raise TraceError("stop() called without an open tracing window")
        if self._owner_thread != threading.get_ident():
            raise TraceError("stop() must be called on the thread that called start()")
        if self._nesting:
            self._nesting -= 1
            return self.dag
        try:
            session.stop()
        finally:
            self._session = None
            if self._patcher is not self._kept_patcher:
                self._patcher.restore()
            self._patcher = None
        meter = session.meter
        metadata = {
            "tracer": {
                "max_depth": self.max_depth,
                "track_memory": self.track_memory,
                "memory_mode": session.memory_mode,
                "calibration_ns": self._calibration.to_dict(),
                "recorded_calls": meter.calls,
                "skipped_events": meter.skipped,
                "hook_time_ns": meter.overhead_ns,
                "window_ns": session.t_stop_ns - session.t_start_ns,
                "wrapped_functions": len(self._wrapped),
                "line_level": session.line_level,
                "line_level_off_reason": session.line_level_off_reason,
                "line_events": meter.lines,
                "event_source": "sys.monitoring" if session.use_monitoring else "sys.setprofile",
                "prune_after": self.prune_after,
                "pruned": sorted(set(session.pruned)),
                "lines_stopped": sorted(set(session.lines_stopped)),
                "error": session.error,
            },
            "started_at_unix_s": round(self._t_wall0, 3),
            "python": python_info(),
            "pid": os.getpid(),
        }
        dag = self.dag_builder.build(session, self._calibration, metadata)
        if session.error:
            log.warning("tracing stopped early: %s", session.error)
        return dag

    def _wrap_targets(self, function_filter: FunctionFilter) -> list[str]:
        """Names to interpose: the wrapped libraries' callables the filter does not exclude."""
        import codedag.trace.interpose as interpose

        names = interpose.library_targets() if self.wrap_libraries else []
        names = [n for n in names if function_filter.classify_callable(n) is not None]
        return names + [n for n in self.wrap if n not in names]

    @contextmanager
    def wrappers_kept(self) -> Iterator[EnhancedTracer]:
        """Keep the library wrappers installed across the windows opened inside this block.

        Installing the wrappers costs tens of milliseconds per window (hundreds of functions
        patched and references rebound); tracing many batches or a decorated function called
        in a loop pays it once here. Between windows the wrappers only forward calls.
        """
        import codedag.trace.interpose as interpose
        from codedag.patching import Patcher

        if self._kept_patcher is not None:
            yield self
            return
        patcher = Patcher(label="codedag.trace", stable_references=True)
        names = self._wrap_targets(shared_classifications(self.function_filter).filter)
        self._wrapped = interpose.install(patcher, names, self.function_filter.library_key)
        self._kept_patcher = patcher
        try:
            yield self
        finally:
            self._kept_patcher = None
            if self._patcher is patcher:  # a window is still open: its stop() has nothing left
                self._patcher = Patcher(label="codedag.trace")
            patcher.restore()

    @contextmanager
    def tracing_context(self, reach: Iterable[object] = ()) -> Iterator[EnhancedTracer]:
        """Trace the calling thread inside the ``with`` block.

        The profile hook is removed and the previous one restored on exit, also when the block
        raises: the exception propagates unchanged and the partial DAG is kept. ``reach``: as
        for :meth:`start`.
        """
        self.start(reach)
        try:
            yield self
        finally:
            self.stop()

    def trace(self, func: Callable[..., Any], /, *args: Any, **kwargs: Any) -> Any:
        """Call ``func(*args, **kwargs)`` inside a tracing window and return its result."""
        with self.tracing_context():
            return func(*args, **kwargs)

    def trace_dataloader(self, loader: object, warmup: int = 1) -> Any:
        """Trace the first batch of a DataLoader after ``warmup`` untraced runs of it; return
        the batch (see :func:`codedag.trace.trace_dataloader`)."""
        return trace_first_batch(loader, self, warmup=warmup)

    # ------------------------------------------------------------------ exports
    def export_dataflow_graph(self) -> dict[str, Any]:
        """The last DAG as JSON-ready data: ``to_dict()`` plus call-level ``dataflow`` triples.

        ``dataflow`` lists ``[producer call, consumer call, value]`` for every value a call
        produced and another call used.
        """
        from codedag.graph.algorithms import dataflow_edges

        data = self.dag.to_dict()
        data["dataflow"] = [list(t) for t in dataflow_edges(self.dag)]
        return data

    def export_visualization(
        self,
        path: str | os.PathLike[str],
        max_nodes: int = 1500,
        svg_max_nodes: int | None = None,
    ) -> Path:
        """Write the last DAG as SVG (through ``dot``) or DOT; return the file written.

        A path ending in ``.dot`` gets DOT text (its first ``max_nodes`` nodes). For ``.svg`` the
        DOT text is written next to it (``.dot``) instead, with a warning, when the DAG has more
        than ``svg_max_nodes`` nodes (default :data:`~codedag.trace.dot.SVG_MAX_NODES`; the
        warning says where a coarsened, readable drawing comes from) or without the ``dot``
        program (the warning says how to install Graphviz).
        """
        from codedag.trace.dot import SVG_MAX_NODES, write_visualization

        limit = SVG_MAX_NODES if svg_max_nodes is None else svg_max_nodes
        return write_visualization(self.dag, path, max_nodes=max_nodes, svg_max_nodes=limit)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Save the last DAG as JSON (``.gz`` compresses)."""
        return self.dag.save(path)


def trace_function(
    func: F | None = None, *, max_depth: int = 10, track_memory: bool = True, **options: Any
) -> Any:
    """Decorator: trace every call of the function; the last DAG is ``wrapper.last_dag``.

    Usable bare (``@trace_function``) or with options (``@trace_function(max_depth=5)``);
    ``options`` go to :class:`EnhancedTracer`. A call made while the same decorated function is
    already being traced on this thread (recursion) runs inside the outer window.
    """

    def decorate(fn: F) -> F:
        local = threading.local()

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if getattr(local, "active", False):
                return fn(*args, **kwargs)
            tracer = EnhancedTracer(max_depth=max_depth, track_memory=track_memory, **options)
            local.active = True
            try:
                with tracer.tracing_context():
                    return fn(*args, **kwargs)
            finally:
                local.active = False
                wrapper.tracer = tracer  # type: ignore[attr-defined]
                wrapper.last_dag = tracer.dag  # type: ignore[attr-defined]

        wrapper.tracer = None  # type: ignore[attr-defined]
        wrapper.last_dag = None  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    if func is not None:
        return decorate(func)
    return decorate


def trace_dataloader(
    loader: object, tracer: EnhancedTracer | None = None, warmup: int = 1
) -> tuple[EnhancedTracer, Any]:
    """Trace the first batch of ``loader``; return ``(tracer, batch)``. The DAG is ``tracer.dag``.

    A DataLoader with workers is traced by replaying worker 0's first batch in-process
    (:mod:`codedag.trace.dataloader`).

    Args:
        loader: a ``torch.utils.data.DataLoader``.
        tracer: the tracer to use (a default :class:`EnhancedTracer` when None).
        warmup: untraced runs of the same batch before the traced one.
    """
    tracer = tracer or EnhancedTracer()
    return tracer, trace_first_batch(loader, tracer, warmup=warmup)

"""Batch timing that is right with asynchronous GPUs, split into data wait and compute.

For every batch the ``Timer`` records two durations:

- **batch time**: ``start_batch()`` to ``end_batch()``, the training step itself;
- **data wait**: the previous ``end_batch()`` (or the mode's start, or the end of a ``paused()``
  block) to this ``start_batch()``: the time the loop waited for the input pipeline.

CUDA kernels run asynchronously, so a host clock read right after ``loss.backward()`` measures how
fast work was *queued*, not how long it took. ``cuda_timing`` picks how the timer deals with that:

- ``"sync"``: wait for the CUDA device before each clock read (exact wall time per step;
  costs one device sync per step, which a loop calling ``loss.item()`` pays anyway);
- ``"events"``: CUDA events recorded on the current stream, no host sync per step. Batch time is
  the GPU time between the step's two events; data wait is the GPU idle gap between the previous
  step's end event and this step's start event, which is exactly when the GPU starves on input.
  Events are resolved lazily (a bounded queue, drained with ``query()``);
- ``"none"``: host clock only (CPU training);
- ``"auto"`` (default): ``"sync"`` when torch has initialized CUDA in this process, else ``"none"``,
  decided at the first batch (so moving the model to the GPU after ``start_mode`` still counts).

Memory stays constant however long the run: moments and quantiles are streamed
(``codedag.monitor.stats``), plots get a downsampled series, and every step goes to ``on_steps``
as a :class:`~codedag.monitor.records.StepRecord` (the monitor's sinks: raw CSV, TensorBoard,
MLflow).

**The training thread only appends.** A step is one clock read at each end and a plain tuple
appended to a :class:`collections.deque` (``append`` and ``popleft`` are atomic: no lock on that
path). :meth:`Timer.fold` turns the buffered tuples into statistics and records and hands them to
``on_steps``, in order; the monitor calls it from its resource sampler's thread every sampling
interval, and at stop. Without such a thread, or when it falls behind, the training thread folds
every ``record_block`` steps itself.

**Warm-up.** The first steps of a mode pay for start-up (DataLoader workers, caches, kernel
selection, allocator growth): one run measured 830 ms for its first step against about 240 ms
for the others. The summary's ``steady`` section leaves out the first ``warmup_batches`` steps
and gives means, spread (std, quartiles) and throughput of the rest; ratios between modes are
taken there.
"""

from __future__ import annotations

import functools
import logging
import math
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, Generic, Protocol, TypeVar, overload

from codedag.devices.torch_devices import cuda_initialized, synchronize
from codedag.errors import ConfigError
from codedag.monitor.records import StepRecord
from codedag.monitor.stats import Downsampler, LogHistogram, RunningStats
from codedag.monitor.step_figures import StepFigures

log = logging.getLogger(__name__)

CUDA_TIMING_MODES = ("auto", "sync", "events", "none")
WARMUP_BATCHES = 1  # steps of each mode left out of the steady-state figures by default
RECORD_BLOCK = 128  # rows buffered on the hot path before the training thread folds them itself
# A buffered step: index, host clock at its end, batch time, data wait, samples.
_Row = tuple[int, float, float, float, int]
_T = TypeVar("_T")


class TimingEvent(Protocol):
    """What the timer needs of ``torch.cuda.Event(enable_timing=True)``."""

    def record(self) -> None: ...
    def query(self) -> bool: ...
    def synchronize(self) -> None: ...
    def elapsed_time(self, end: Any) -> float: ...  # milliseconds


def _torch_event() -> TimingEvent:
    import torch

    return torch.cuda.Event(enable_timing=True)


class _Folded(Generic[_T]):
    """A figure of the timer's :class:`StepFigures`, read after folding the buffered steps."""

    def __init__(self, name: str, doc: str) -> None:
        self.name = name
        self.__doc__ = doc

    @overload
    def __get__(self, timer: None, owner: type) -> _Folded[_T]: ...
    @overload
    def __get__(self, timer: Timer, owner: type) -> _T: ...
    def __get__(self, timer: Timer | None, owner: type) -> Any:
        if timer is None:
            return self
        timer.fold()
        return getattr(timer._figures, self.name)


class Timer:
    """Times batches and the total run; see the module docstring for the measured quantities.

    Args:
        cuda_timing: ``"auto"``, ``"sync"``, ``"events"`` or ``"none"``.
        clock: host clock in seconds (injectable for tests).
        on_steps: receives every recorded step, in blocks.
        warmup_batches: first steps left out of the ``steady`` summary.
        downsample_capacity: most points kept in memory for plots.
        sync_fn: device synchronize used by ``"sync"`` (default: the current CUDA device's).
        event_factory: makes timing events for ``"events"`` (default CUDA events).
        max_pending_events: events in flight before the oldest is waited for.
        record_block: steps buffered before the training thread folds them itself (a thread
            calling :meth:`fold` more often keeps every fold off the training thread).
    """

    __slots__ = (
        "_batch_start",
        "_block",
        "_clock",
        "_event",
        "_figures",
        "_host_only",
        "_last_end",
        "_lock",
        "_max_pending",
        "_next_idx",
        "_on_steps",
        "_pending",
        "_prev_end_ev",
        "_rows",
        "_start",
        "_start_ev",
        "_stop",
        "_sync",
        "_warned",
        "requested_timing",
        "timing",
        "warmup_batches",
    )

    def __init__(
        self,
        cuda_timing: str = "auto",
        *,
        clock: Callable[[], float] = time.perf_counter,
        on_steps: Callable[[list[StepRecord]], None] | None = None,
        warmup_batches: int = WARMUP_BATCHES,
        downsample_capacity: int = 2048,
        sync_fn: Callable[[], None] | None = None,
        event_factory: Callable[[], TimingEvent] | None = None,
        max_pending_events: int = 256,
        record_block: int = RECORD_BLOCK,
    ) -> None:
        if cuda_timing not in CUDA_TIMING_MODES:
            raise ConfigError(
                f"cuda_timing must be one of {CUDA_TIMING_MODES}, got {cuda_timing!r}"
            )
        self.requested_timing = cuda_timing
        self.timing: str | None = None if cuda_timing == "auto" else cuda_timing
        self._clock = clock
        if warmup_batches < 0:
            raise ConfigError(f"warmup_batches must be >= 0, got {warmup_batches!r}")
        self._on_steps = on_steps
        self.warmup_batches = int(warmup_batches)
        self._sync = sync_fn or functools.partial(synchronize, "cuda")
        self._event = event_factory or _torch_event
        self._max_pending = max(1, max_pending_events)
        self._figures = StepFigures(self.warmup_batches, downsample_capacity)
        self._rows: deque[_Row] = deque()  # appended by the training thread, folded by any
        self._block = max(1, int(record_block))
        self._lock = threading.RLock()  # one fold at a time, and no reader during one
        self._host_only = False  # started with host timing: the hot path needs no other check
        self._start: float | None = None
        self._stop: float | None = None
        self._batch_start: float | None = None
        self._last_end = 0.0  # set by start(), every step's end and every paused() block
        self._start_ev: TimingEvent | None = None
        self._prev_end_ev: TimingEvent | None = None
        self._pending: deque[tuple[int, float, float, Any, Any, Any, int]] = deque()
        self._next_idx = 0
        self._warned: set[str] = set()

    # Readers fold the rows the hot path buffered before they look.
    batch_stats: _Folded[RunningStats] = _Folded("batch_stats", "Moments of the batch times (s).")
    wait_stats: _Folded[RunningStats] = _Folded("wait_stats", "Moments of the data waits (s).")
    step_stats: _Folded[RunningStats] = _Folded("step_stats", "Moments of wait + batch (s).")
    batch_hist: _Folded[LogHistogram] = _Folded("batch_hist", "Quantiles of the batch times.")
    wait_hist: _Folded[LogHistogram] = _Folded("wait_hist", "Quantiles of the data waits.")
    series: _Folded[Downsampler] = _Folded(
        "series", "Downsampled ``(batch, batch_time_s, data_wait_s)`` points."
    )
    samples: _Folded[int] = _Folded("samples", "Samples counted through ``end_batch(n_samples)``.")

    # ----------------------------------------------------------------- run
    def start(self) -> None:
        """Start the total-time clock (called by ``ExperimentMonitor.start_mode``)."""
        self._start = self._clock()
        self._stop = None
        self._last_end = self._start
        self._host_only = self.timing == "none"

    def stop(self) -> float:
        """Stop the total-time clock, resolve pending events; returns total time in seconds."""
        if self._batch_start is not None:
            self._warn_once("open", "stop() with a batch still open: that batch is not recorded")
            self._batch_start = None
        self.drain(wait=True)
        self.fold()
        if self._start is not None and self._stop is None:
            self._stop = self._clock()
        return self.total_time_s

    @property
    def total_time_s(self) -> float:
        """Seconds from ``start()`` to ``stop()`` (or to now while running)."""
        if self._start is None:
            return 0.0
        end = self._stop if self._stop is not None else self._clock()
        return end - self._start

    @property
    def current_step(self) -> int:
        """Index of the open step, else of the last one ended (-1 before the first)."""
        return self._next_idx if self._batch_start is not None else self._next_idx - 1

    @property
    def num_batches(self) -> int:
        """Batches recorded so far (pending CUDA events not counted)."""
        return self.batch_stats.count

    # -------------------------------------------------------------- batches
    def start_batch(self) -> None:
        """Mark the start of a training step (the batch has been received)."""
        if self._host_only and self._batch_start is None:
            self._batch_start = self._clock()
            return
        if self._start is None:
            self.start()
        if self.timing is None:
            self.timing = "sync" if cuda_initialized() else "none"
            self._host_only = self.timing == "none"
            log.debug("batch timing: %s", self.timing)
        if self._batch_start is not None:
            self._warn_once(
                "twice", "start_batch() twice without end_batch(): restarting the batch"
            )
        if self.timing == "sync":
            self._sync()
        elif self.timing == "events":
            self._start_ev = self._event()
            self._start_ev.record()
        self._batch_start = self._clock()

    def end_batch(self, n_samples: int = 0) -> float:
        """Mark the end of a training step; ``n_samples`` (optional) feeds samples/s.

        Returns the host clock read at the step's end (``-inf`` when the call was ignored).
        """
        begin = self._batch_start
        if begin is None or not self._host_only:
            return self._end_batch_timed(n_samples)
        now = self._clock()
        self._batch_start = None
        idx = self._next_idx
        self._next_idx = idx + 1
        rows = self._rows
        rows.append((idx, now, now - begin, begin - self._last_end, n_samples))
        self._last_end = now
        if len(rows) >= self._block:
            self.fold()
        return now

    def _end_batch_timed(self, n_samples: int) -> float:
        """``end_batch`` with a device to wait for (``sync``, ``events``), or a misuse."""
        begin = self._batch_start
        if begin is None:
            self._warn_once("end", "end_batch() without start_batch(): ignored")
            return -math.inf
        if self.timing == "sync":
            self._sync()
        now = self._clock()
        self._batch_start = None
        host_wait = begin - self._last_end
        self._last_end = now
        idx = self._next_idx
        self._next_idx += 1
        if self.timing == "events":
            end_ev = self._event()
            end_ev.record()
            self._pending.append(
                (idx, now, host_wait, self._prev_end_ev, self._start_ev, end_ev, n_samples)
            )
            self._prev_end_ev = end_ev
            self._start_ev = None
            if len(self._pending) > self._max_pending:
                self._pending[0][5].synchronize()  # bound the queue: wait for the oldest step
            self.drain()
            return now
        self._record(idx, now, now - begin, host_wait, n_samples)
        return now

    def position(self) -> tuple[int, float]:
        """``current_step`` and the time of the latest clock read, in seconds since the start.

        What a logged value is stamped with, without reading the clock again: the open step's
        start, else the last step's end (or the end of a ``paused()`` block).
        """
        start = self._start
        if start is None:
            return self.current_step, 0.0
        begin = self._batch_start
        if begin is not None:
            return self._next_idx, begin - start
        return self._next_idx - 1, self._last_end - start

    def add(
        self, batch_time_s: float, data_wait_s: float, *, time_s: float, n_samples: int = 0
    ) -> None:
        """Record a batch measured elsewhere (a rebuild from CSV); ``time_s``: end since start."""
        idx = self._next_idx
        self._next_idx += 1
        start = self._start if self._start is not None else 0.0
        self._record(idx, start + time_s, batch_time_s, data_wait_s, n_samples)

    def abandon_batch(self) -> None:
        """Forget an open batch (the loop body raised or broke out): it is not recorded."""
        self._batch_start = None
        self._start_ev = None

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Exclude a block (validation, checkpointing) from the next batch's data wait."""
        try:
            yield
        finally:
            self._last_end = self._clock()
            self._prev_end_ev = None

    def drain(self, wait: bool = False) -> None:
        """Record the batches whose CUDA events finished; with ``wait``, wait for all of them."""
        pending = self._pending
        while pending:
            idx, now, host_wait, prev_end, start_ev, end_ev, n = pending[0]
            if wait:
                end_ev.synchronize()
            elif not end_ev.query():
                return
            pending.popleft()
            batch_s = start_ev.elapsed_time(end_ev) / 1000.0
            wait_s = prev_end.elapsed_time(start_ev) / 1000.0 if prev_end is not None else host_wait
            self._record(idx, now, batch_s, max(wait_s, 0.0), n)

    def _record(self, idx: int, now: float, batch_s: float, wait_s: float, n_samples: int) -> None:
        rows = self._rows
        rows.append((idx, now, batch_s, wait_s, n_samples))
        if len(rows) >= self._block:
            self.fold()

    def fold(self) -> None:
        """Fold the steps buffered by the hot path into the statistics, the series and
        ``on_steps``, in order; safe to call from any thread."""
        with self._lock:
            rows = self._rows
            count = len(rows)  # what the training thread appends meanwhile waits for the next
            if not count:
                return
            origin = self._start if self._start is not None else 0.0
            pop = rows.popleft
            idxs, ends, batch, wait, samples = zip(*[pop() for _ in range(count)])
            make = functools.partial(tuple.__new__, StepRecord)
            times = [end - origin for end in ends]
            records = list(map(make, zip(idxs, times, batch, wait, samples)))
            self._figures.add(records, idxs, batch, wait, samples)
            if self._on_steps is not None:
                self._on_steps(records)

    def _warn_once(self, key: str, message: str) -> None:
        if key not in self._warned:
            self._warned.add(key)
            log.warning(message)

    # -------------------------------------------------------------- results
    def summary(self) -> dict[str, Any]:
        """Total time, batch time, data wait, step time and throughput (seconds, percent)."""
        with self._lock:  # a fold on another thread would change the figures midway
            return self._summary()

    def _summary(self) -> dict[str, Any]:
        self.fold()
        return {
            "total_time": self.total_time_s,
            **self._figures.summary(),
            "timing": {"cuda_timing": self.timing or "none", "requested": self.requested_timing},
            "steady": self._figures.steady(),
        }

    def batch_series(self) -> tuple[list[list[float]], list[list[float]], int]:
        """Downsampled ``[[batch, batch_time_s]]``, ``[[batch, data_wait_s]]`` and the stride."""
        with self._lock:
            pts = self.series.points()
            stride = self._figures.series.stride
        return [[p[0], p[1]] for p in pts], [[p[0], p[2]] for p in pts], stride

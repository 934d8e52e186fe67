"""The measured loop: warm-up, a torch.profiler window, then an unprofiled timed window.

How each figure is taken:

- data wait: ``time.perf_counter()`` around ``next(iterator)`` only, inside a
  ``codedag::fetch_batch`` annotation so that the analysis can leave data loading out of the step's
  op and allocation counts;
- step time on CUDA: a CUDA event recorded before and after each step on the current stream, read
  once at the end of the window. Nothing synchronizes between steps, so a ``.item()`` inside the
  step shows up as the bubble it causes. The gap between one step's end event and the next step's
  start event is the time the GPU sat idle waiting for the host (mostly for data);
- step time on the CPU: ``time.perf_counter()`` around the step (the CPU runs synchronously);
- the profiler (record_shapes, profile_memory) slows tiny ops down, so the headline timings come
  from a second, unprofiled window of ``timed_steps`` steps on the same iterator.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import socket
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile, record_function, schedule

from codedag.devices.torch_devices import synchronize
from codedag.errors import ExperimentError
from codedag.profile.config import ProfileConfig
from codedag.profile.events import FETCH_ANNOTATION
from codedag.profile.program import StepProgram
from codedag.util.io import atomic_write_with

log = logging.getLogger(__name__)

_SKIPPED_PROFILER_STEPS = 2  # schedule(wait=1, warmup=1)

ProgressCallback = Callable[[str, int, int], None]


@dataclass
class WindowTimes:
    """Per-step timings of one window, in seconds."""

    data_wait_s: list[float] = field(default_factory=list)
    step_s: list[float] = field(default_factory=list)
    host_step_s: list[float] = field(default_factory=list)
    device_idle_s: list[float] = field(default_factory=list)
    wall_s: float = 0.0


@dataclass
class Measurement:
    """What the loop measured; the analysis turns it into figures."""

    profiled: WindowTimes
    timed: WindowTimes
    profiler: Any  # torch.profiler.profile, stopped
    trace_path: Path
    active_steps: int
    cuda_memory_delta: dict[str, int] = field(default_factory=dict)
    iterator_restarts: int = 0


class _BatchSource:
    """Cycles through ``batches``, starting a new epoch when the iterator runs out."""

    def __init__(self, batches: Iterable[Any] | None) -> None:
        self.batches = batches
        self.iterator: Iterator[Any] | None = None
        self.restarts = -1

    def next(self) -> Any:
        if self.batches is None:
            return None
        if self.iterator is not None:
            with contextlib.suppress(StopIteration):
                return next(self.iterator)
        self.iterator = iter(self.batches)
        self.restarts += 1
        try:
            return next(self.iterator)
        except StopIteration as error:
            raise ExperimentError("the loader yields no batch: expected at least one") from error

    def close(self) -> None:
        self.iterator = None


class _Timer:
    """Times fetch and step per step, with CUDA events on CUDA and the host clock otherwise."""

    def __init__(self, cuda: bool) -> None:
        self.cuda = cuda
        self.window = WindowTimes()
        self._events: list[tuple[Any, Any]] = []
        self._wall0 = self._last_end = 0.0
        self._window_start: Any = None

    def start_window(self) -> None:
        if self.cuda:
            synchronize("cuda")  # once per window: the window starts with an idle queue
        self.window = WindowTimes()
        self._events = []
        self._wall0 = self._last_end = time.perf_counter()
        if self.cuda:
            # GPU idle here, so this event marks the host's start time on the GPU timeline
            self._window_start = torch.cuda.Event(enable_timing=True)
            self._window_start.record()

    def run_step(self, source: _BatchSource, step: Callable[..., Any], has_batches: bool) -> None:
        t0 = time.perf_counter()
        with record_function(FETCH_ANNOTATION):
            batch = source.next()
        t1 = time.perf_counter()
        if self.cuda:
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
        if has_batches:
            step(batch)
        else:
            step()
        if self.cuda:
            end.record()
            self._events.append((start, end))
        t2 = self._last_end = time.perf_counter()
        self.window.data_wait_s.append(t1 - t0)
        self.window.host_step_s.append(t2 - t1)

    def finish_window(self) -> WindowTimes:
        if self.cuda:
            synchronize("cuda")  # once: events can be read now
            previous_end = None
            for start, end in self._events:
                self.window.step_s.append(start.elapsed_time(end) / 1000.0)
                if previous_end is not None:
                    self.window.device_idle_s.append(previous_end.elapsed_time(start) / 1000.0)
                previous_end = end
            # wall time until the GPU finished the window's last step, read off the GPU timeline
            if self._events:
                last_end = self._events[-1][1]
                self.window.wall_s = self._window_start.elapsed_time(last_end) / 1000.0
        else:
            self.window.step_s = list(self.window.host_step_s)
            self.window.wall_s = self._last_end - self._wall0
        return self.window


def _trace_handler(config: ProfileConfig, trace_path: Path) -> Callable[[Any], None]:
    def on_trace_ready(prof: Any) -> None:
        # kineto saves a trace only once; both files are written anew, never through a link
        atomic_write_with(trace_path, lambda draft: prof.export_chrome_trace(str(draft)))
        if config.tensorboard:
            # the file name torch.profiler.tensorboard_trace_handler writes: <worker>.<ns>.pt...
            worker = f"{socket.gethostname()}_{os.getpid()}"
            copy = trace_path.parent / f"{worker}.{time.time_ns()}.pt.trace.json"
            atomic_write_with(copy, lambda draft: shutil.copyfile(trace_path, draft))

    return on_trace_ready


def _cuda_counters() -> dict[str, int]:
    stats = torch.cuda.memory_stats()
    keys = ("allocation.all.allocated", "segment.all.allocated", "num_alloc_retries")
    return {key: int(stats.get(key, 0)) for key in keys}


def run_measurement(
    program: StepProgram, config: ProfileConfig, progress: ProgressCallback | None = None
) -> Measurement:
    """Warm up, profile ``profile_steps`` steps, then time ``timed_steps`` unprofiled steps."""
    cuda = config.device == "cuda"
    has_batches = program.batches is not None
    source = _BatchSource(program.batches)
    timer = _Timer(cuda)
    report = progress or (lambda phase, done, total: None)
    trace_path = Path(config.trace_dir) / f"{program.name}.{config.device}.pt.trace.json"

    timer.start_window()
    for i in range(config.warmup_steps):
        timer.run_step(source, program.step, has_batches)
        report("warm-up", i + 1, config.warmup_steps)

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    total = _SKIPPED_PROFILER_STEPS + config.profile_steps
    before: dict[str, int] = {}
    with profile(
        activities=activities,
        schedule=schedule(wait=1, warmup=1, active=config.profile_steps, repeat=1),
        on_trace_ready=_trace_handler(config, trace_path),
        record_shapes=True,
        profile_memory=True,
        with_stack=config.with_stack,
    ) as prof:
        for i in range(total):
            timer.run_step(source, program.step, has_batches)
            if i == _SKIPPED_PROFILER_STEPS - 1:
                # Synchronize in the profiler's discarded warm-up step, never in the active window.
                timer.start_window()
                before = _cuda_counters() if cuda else {}
            prof.step()
            report("profile", i + 1, total)
    # The last prof.step() closed the active window: reading the events adds no sync to the trace.
    profiled = timer.finish_window()
    after = _cuda_counters() if cuda else {}
    delta = {key: after[key] - before.get(key, 0) for key in after}

    timer.start_window()
    for i in range(config.timed_steps):
        timer.run_step(source, program.step, has_batches)
        report("timed", i + 1, config.timed_steps)
    timed = timer.finish_window() if config.timed_steps else profiled
    restarts = max(0, source.restarts)
    source.close()
    log.debug("measured %s: %d profiled, %d timed steps", program.name, total, config.timed_steps)
    return Measurement(
        profiled=profiled,
        timed=timed,
        profiler=prof,
        trace_path=trace_path,
        active_steps=config.profile_steps,
        cuda_memory_delta=delta,
        iterator_restarts=restarts,
    )

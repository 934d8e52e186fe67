"""Time one DataLoader setting: batches per second, the consumer's wait, start-up, worker memory.

A trial iterates a fresh DataLoader (built by the caller) and stamps the moment each batch
arrives. With N workers, batches arrive in bursts of N, so the samples are mean intervals over
whole cycles of ``max(1, N)`` batches after the first cycle (worker start-up and the initial
ramp excluded); the time from ``iter()`` to the first batch is kept apart as ``startup_s``. An
optional consumer runs after each batch (a sleep of the training step's time, a copy to the
GPU, a step function): the wait in ``next()`` is then the time the step would wait for data.

The memory of each setting is read from its worker processes while they run: resident set size,
and the unique set size (the pages a worker copied: with ``fork``, a worker shares the parent's
pages until it touches them, and Python's reference counting touches the dataset's objects).
"""

from __future__ import annotations

import logging
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codedag.plan.loader import LoaderSettings
from codedag.tune.stats import MIN_SAMPLES, median_s, median_se_s

log = logging.getLogger(__name__)

Consumer = Callable[[Any], None]
StopRule = Callable[[list[float]], "str | None"]


@dataclass
class TrialRun:
    """What one trial measured (seconds and bytes).

    Attributes:
        settings: the setting timed.
        intervals_s: mean batch interval of each full cycle after the first.
        waits_s: the consumer's wait in ``next()`` for each batch after the first.
        startup_s: ``iter()`` to the first batch.
        arrivals_s: ``iter()`` to each batch.
        batches: batches taken.
        worker_rss_bytes: resident memory of the worker processes together.
        worker_uss_bytes: their unique memory (``None`` where unreadable).
        stopped: why the trial ended before its batch budget, if it did.
        error: the exception text when the setting failed to load batches.
    """

    settings: LoaderSettings
    intervals_s: list[float] = field(default_factory=list)
    waits_s: list[float] = field(default_factory=list)
    startup_s: float = 0.0
    arrivals_s: list[float] = field(default_factory=list)
    batches: int = 0
    worker_rss_bytes: int = 0
    worker_uss_bytes: int | None = None
    stopped: str | None = None
    error: str | None = None

    @property
    def interval_s(self) -> float:
        """Median of the cycles' mean times between batches (``nan`` before the first cycle)."""
        return median_s(self.intervals_s)

    def first_epoch_s(self, batches: int) -> float | None:
        """``iter()`` to the last of an epoch of ``batches`` batches: measured as far as the
        trial went, the rest at :attr:`interval_s` (None when nothing arrived or no rest can be
        timed)."""
        if not self.arrivals_s or batches < 1:
            return None
        taken = min(batches, len(self.arrivals_s))
        rest = batches - taken
        if not rest:
            return self.arrivals_s[taken - 1]
        interval = self.interval_s
        if not self.intervals_s or interval != interval:
            return None
        return self.arrivals_s[taken - 1] + rest * interval

    @property
    def stderr_s(self) -> float:
        """Standard error of :attr:`interval_s`."""
        return median_se_s(self.intervals_s)

    @property
    def batches_per_s(self) -> float:
        """Batches delivered per second at :attr:`interval_s` (0 when nothing was timed)."""
        interval = self.interval_s
        return 1.0 / interval if interval and interval == interval and interval > 0 else 0.0

    @property
    def wait_s(self) -> float:
        """Mean wait for data per batch (a share of the run's time, so the mean, not a median)."""
        return statistics.fmean(self.waits_s) if self.waits_s else 0.0


def worker_memory(iterator: object) -> tuple[int, int | None]:
    """``(rss, uss)`` bytes of a DataLoader iterator's live worker processes (0 without any)."""
    import psutil

    workers = getattr(iterator, "_workers", None) or []
    rss, uss = 0, 0
    uss_known = True
    for worker in workers:
        pid = getattr(worker, "pid", None)
        if pid is None:
            continue
        try:
            process = psutil.Process(pid)
            rss += int(process.memory_info().rss)
            try:
                uss += int(process.memory_full_info().uss)
            except (psutil.AccessDenied, AttributeError, OSError):
                uss_known = False
        except psutil.Error:
            continue
    return rss, (uss if uss_known else None)


def run_trial(
    make_loader: Callable[[], Any],
    settings: LoaderSettings,
    *,
    max_batches: int,
    max_s: float,
    consumer: Consumer | None = None,
    stop: StopRule | None = None,
    on_batch: Callable[[], None] | None = None,
) -> TrialRun:
    """Time ``make_loader()``'s batches; see the module docstring.

    Args:
        make_loader: builds the DataLoader to time (its sampler should not run out).
        settings: the setting it has (recorded in the result).
        max_batches: most batches to take (raised to cover :data:`MIN_SAMPLES` cycles).
        max_s: stop after this long once :data:`MIN_SAMPLES` cycles are timed.
        consumer: runs after each batch, like a training step.
        stop: called with the intervals after each cycle; a reason stops the trial early.
        on_batch: called after each batch (progress).
    """
    cycle = max(1, settings.num_workers)
    limit = max(max_batches, cycle * (MIN_SAMPLES + 1))
    run = TrialRun(settings)
    loader = make_loader()
    stamps: list[float] = []
    iterator = None
    try:
        start = time.perf_counter()
        iterator = iter(loader)
        for index in range(limit):
            before = time.perf_counter()
            try:
                batch = next(iterator)
            except StopIteration:
                run.stopped = "the loader ran out of batches"
                break
            arrived = time.perf_counter()
            stamps.append(arrived)
            run.arrivals_s.append(arrived - start)
            if index == 0:
                run.startup_s = arrived - start
            else:
                run.waits_s.append(arrived - before)
            if consumer is not None:
                consumer(batch)
            del batch
            run.batches = index + 1
            if on_batch is not None:
                on_batch()
            if run.batches % cycle == 0 and run.batches > cycle:
                run.intervals_s.append((stamps[-1] - stamps[-1 - cycle]) / cycle)
                if run.batches == limit - cycle and settings.num_workers:
                    run.worker_rss_bytes, run.worker_uss_bytes = worker_memory(iterator)
                reason = stop(run.intervals_s) if stop is not None else None
                if reason is not None:
                    run.stopped = reason
                    break
                enough = len(run.intervals_s) >= MIN_SAMPLES
                if enough and arrived - start > max_s:
                    run.stopped = f"time limit ({max_s:g} s) reached"
                    break
        if settings.num_workers and not run.worker_rss_bytes and iterator is not None:
            run.worker_rss_bytes, run.worker_uss_bytes = worker_memory(iterator)
    except Exception as error:  # a setting that cannot load (e.g. unpicklable for spawn)
        run.error = f"{type(error).__name__}: {error}"
        log.warning("loader setting %s failed: %s", settings.label(), run.error)
    finally:
        _end_workers(iterator)
        del iterator, loader
    return run


def _end_workers(iterator: object) -> None:
    """Shut a DataLoader iterator's workers down now, before the next setting is timed.

    Explicit rather than left to a garbage collection: a full collection of a large process
    (a notebook, a test session) takes longer than many of the trials it would separate.
    """
    shutdown = getattr(iterator, "_shutdown_workers", None)
    if callable(shutdown):
        shutdown()


def sleep_consumer(step_s: float) -> Consumer:
    """A consumer that holds each batch for ``step_s`` (the accelerator busy with a step)."""

    def consume(_batch: object) -> None:
        time.sleep(step_s)

    return consume


def device_consumer(device: str, then: Consumer | None = None) -> Consumer:
    """A consumer that copies each batch to ``device`` (non-blocking when pinned) and waits."""
    import torch

    from codedag.devices.torch_devices import synchronize

    def move(value: object) -> Any:
        if isinstance(value, torch.Tensor):
            return value.to(device, non_blocking=value.is_pinned())
        if isinstance(value, list | tuple):
            return [move(v) for v in value]
        if isinstance(value, dict):
            return {k: move(v) for k, v in value.items()}
        return value

    def consume(batch: object) -> None:
        moved = move(batch)
        synchronize(device)
        del moved
        if then is not None:
            then(batch)

    return consume

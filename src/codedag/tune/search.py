"""The search: which DataLoader settings to time, in which order, and when to stop one early.

Phases, each around the best setting so far (coordinate descent over a small grid):

1. ``yours``: the DataLoader as the program built it (the reference for everything);
2. ``workers``: ``num_workers`` from 0 to the CPU limit, one thread per worker: every count up to
   :data:`EVERY_COUNT_UP_TO`; above it a doubling ladder (0, 1, 2, 4, ..., the limit), then one
   count halfway above the fastest and a bisection down to the cheapest count that is enough
   (as fast as the fastest; with a step time, keeps the step fed). Either way the counts stop
   rising once one is not clearly faster than the one before it (beyond the noise and the
   margin) or keeps the step fed. Sixteen CPUs take at most nine trials instead of seventeen,
   and the costliest (most workers) are the ones skipped;
3. ``threads``: the best worker count with the libraries' default threads and with
   ``CPUs // workers`` threads;
4. ``prefetch``: the best setting with other ``prefetch_factor`` values;
5. ``pin_memory``: on and off, only when batches are copied to a CUDA device.

A setting stops early as soon as its median cycle interval is longer than the best's so far by
more than the spread (:func:`codedag.tune.stats.clearly_slower`, the rule of
:mod:`codedag.measure`); a setting whose workers would not fit in the memory left is not started. Fixed settings (``TuneOptions.fixed``) are never varied.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from codedag.plan.loader import TUNABLE_KEYS, LoaderSettings, TrialStatus
from codedag.tune.limits import MachineLimits
from codedag.tune.measure import Consumer, TrialRun, run_trial
from codedag.tune.options import TuneOptions, apply_fixed
from codedag.tune.stats import MIN_SAMPLES, clearly_faster, clearly_slower
from codedag.tune.variants import build_variant

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

log = logging.getLogger(__name__)

MEMORY_HEADROOM = 0.8
"""Share of the memory left that the workers of one setting may take."""

FAST_ENOUGH_SHARE = 0.05
"""A loader keeps the step fed when the step waits less than this share of its time."""

EVERY_COUNT_UP_TO = 4
"""Up to this many workers every count is timed; above it, a ladder and a bisection."""


def settings_key(settings: LoaderSettings) -> tuple[Any, ...]:
    """A hashable key: equal for settings that make the same DataLoader."""
    normal = settings.normalized()
    return tuple(getattr(normal, key) for key in TUNABLE_KEYS)


@dataclass
class Trial:
    """One setting with its measurement (``run`` is ``None`` when it was not started)."""

    settings: LoaderSettings
    phase: str
    run: TrialRun | None = None
    status: TrialStatus = "measured"
    note: str = ""

    @property
    def usable(self) -> bool:
        """Measured well enough to be chosen."""
        run = self.run
        return (
            run is not None
            and run.error is None
            and self.status == "measured"
            and len(run.intervals_s) >= MIN_SAMPLES
        )


def fast_enough(trial: Trial, step_s: float) -> bool:
    """Whether the step waited for data less than :data:`FAST_ENOUGH_SHARE` of its time."""
    run = trial.run
    return run is not None and trial.usable and run.wait_s <= FAST_ENOUGH_SHARE * step_s


def as_fast(trial: Trial, reference: Trial, margin: float, strict: bool) -> bool:
    """Whether ``trial`` is as fast as ``reference`` (both timed).

    ``strict``: slower neither beyond the noise nor beyond the margin; otherwise: not slower
    beyond both (the reference does not clearly beat it).
    """
    assert trial.run is not None and reference.run is not None
    slower = clearly_slower(trial.run.intervals_s, reference.run.intervals_s) is not None
    beyond = trial.run.interval_s > reference.run.interval_s * (1.0 + margin)
    return not (slower or beyond) if strict else not (slower and beyond)


def worker_ladder(top: int) -> list[int]:
    """The worker counts the search times first: every one up to :data:`EVERY_COUNT_UP_TO`,
    else 0, 1, 2, 4, ... below ``top``, then ``top``."""
    if top <= EVERY_COUNT_UP_TO:
        return list(range(top + 1))
    ladder = [0, 1]
    while ladder[-1] * 2 < top:
        ladder.append(ladder[-1] * 2)
    return [*ladder, top]


def _fastest(trials: Iterable[Trial]) -> Trial | None:
    """The usable trial of ``trials`` with the shortest median batch interval."""
    usable = [t for t in trials if t.usable]
    return min(usable, key=lambda t: t.run.interval_s) if usable else None  # type: ignore[union-attr]


@dataclass(eq=False)
class Search:
    """Time settings of one DataLoader and keep every trial (see the module docstring).

    Args:
        loader: the DataLoader to tune.
        yours: its settings.
        options: what to search and for how long.
        limits: the container's CPUs and memory.
        consumer: runs after each batch while timing (a step, a copy to the device).
        tick: called after each timed batch with a description of the setting.
        step_s: the consumer's step time, when there is one: a worker count is then enough
            when it keeps the step fed.
    """

    loader: DataLoader[Any]
    yours: LoaderSettings
    options: TuneOptions
    limits: MachineLimits
    fixed: dict[str, Any]
    consumer: Consumer | None
    tick: Callable[[str], None]
    step_s: float | None = None
    trials: dict[tuple[Any, ...], Trial] = field(default_factory=dict, init=False)
    started: float = field(default_factory=time.perf_counter, init=False)
    budget_note: str = field(default="", init=False)

    # ------------------------------------------------------------------ queries
    @property
    def max_workers(self) -> int:
        """The largest worker count searched."""
        if self.options.max_workers is not None:
            return self.options.max_workers
        return self.limits.max_workers

    @property
    def margin(self) -> float:
        """The smallest relative gain worth a change (0.05: 5 %)."""
        return self.options.margin_pct / 100.0

    def best(self) -> Trial | None:
        """The usable trial with the shortest median batch interval."""
        return _fastest(self.trials.values())

    def trial_of(self, settings: LoaderSettings) -> Trial | None:
        """The trial of ``settings``, if it was timed."""
        return self.trials.get(settings_key(settings))

    # ------------------------------------------------------------------ timing
    def measure(self, settings: LoaderSettings, phase: str) -> Trial:
        """Time ``settings`` unless it was already (memory and budget permitting)."""
        settings = apply_fixed(settings, self.fixed)
        key = settings_key(settings)
        if key in self.trials:
            return self.trials[key]
        trial = Trial(settings, phase)
        self.trials[key] = trial
        elapsed = time.perf_counter() - self.started
        if elapsed > self.options.budget_s and self.trials and phase != "yours":
            trial.status, trial.note = "not measured", "time budget used up"
            self.budget_note = (
                f"the time budget ({self.options.budget_s:g} s) ran out before every setting "
                "was timed"
            )
            return trial
        memory = self._memory_problem(settings)
        if memory:
            trial.status, trial.note = "over memory", memory
            return trial
        best = self.best()
        reference = best.run.intervals_s if best is not None and best.run is not None else None

        def stop(intervals: list[float]) -> str | None:
            return clearly_slower(intervals, reference) if reference else None

        label = settings.label()
        trial.run = run_trial(
            lambda: build_variant(self.loader, settings, endless=True),
            settings,
            max_batches=self.options.batches,
            max_s=self.options.trial_s,
            consumer=self.consumer,
            stop=stop if phase != "yours" else None,
            on_batch=lambda: self.tick(label),
        )
        run = trial.run
        if run.error is not None:
            trial.status, trial.note = "not measured", f"failed: {run.error}"
        elif run.stopped and run.stopped.startswith(("time limit", "the loader ran out")):
            trial.note = run.stopped
        elif run.stopped:
            trial.status, trial.note = "stopped early", run.stopped
        if trial.usable or trial.status == "stopped early":
            log.info("%s: %.1f batches/s (%s)", label, run.batches_per_s, trial.status)
        return trial

    def _memory_problem(self, settings: LoaderSettings) -> str:
        """Why ``settings``' workers would not fit in the memory left, or ``""``."""
        if not settings.num_workers:
            return ""
        per_worker = 0.0
        for trial in self.trials.values():
            run = trial.run
            if run is None or not trial.settings.num_workers or not run.worker_rss_bytes:
                continue
            used = run.worker_uss_bytes or run.worker_rss_bytes
            per_worker = max(per_worker, used / trial.settings.num_workers)
        need = per_worker * settings.num_workers
        room = self.limits.available_bytes * MEMORY_HEADROOM
        if per_worker and need > room:
            return (
                f"{settings.num_workers} workers would need about {need / 2**20:.0f} MiB "
                f"({per_worker / 2**20:.0f} MiB each, measured), more than "
                f"{MEMORY_HEADROOM:.0%} of the {self.limits.available_bytes / 2**20:.0f} MiB left"
            )
        return ""

    # ------------------------------------------------------------------ phases
    def run(self) -> None:
        """All phases in order."""
        self.measure(self.yours, "yours")
        self.search_workers()
        self.search_threads()
        self.search_prefetch()
        self.search_pin_memory()

    def _around_best(self) -> LoaderSettings:
        best = self.best()
        return best.settings if best is not None else self.yours

    def search_workers(self) -> None:
        """``num_workers`` from 0 to the most, one thread per worker (see the module docstring)."""
        if "num_workers" in self.fixed:
            self._time_workers(self.fixed["num_workers"])
            return
        timed: dict[int, Trial] = {}
        previous: Trial | None = None
        for workers in worker_ladder(self.max_workers):
            trial = timed[workers] = self._time_workers(workers)
            if self._ladder_ends(trial, previous):
                break
            # No workers run with the libraries' own threads: not comparable with one worker.
            previous = trial if workers else None
        if self.max_workers > EVERY_COUNT_UP_TO:
            self._refine_workers(timed)

    def _time_workers(self, workers: int) -> Trial:
        update: dict[str, Any] = {"num_workers": workers}
        if workers and "threads" not in self.fixed:
            update["threads"] = 1
        return self.measure(self.yours.model_copy(update=update), "workers")

    def _ladder_ends(self, trial: Trial, previous: Trial | None) -> bool:
        """Whether more workers are not worth timing after ``trial``."""
        run = trial.run
        if run is None:  # over memory or out of time: more workers would be too
            return True
        if self.step_s and fast_enough(trial, self.step_s):
            return True
        if previous is None or previous.run is None:
            return False
        return not clearly_faster(run.intervals_s, previous.run.intervals_s, self.margin)

    def _enough(self, trial: Trial, timed: dict[int, Trial]) -> bool:
        """Whether ``trial``'s worker count is enough: it keeps the step fed (with a step time),
        else it is as fast as the fastest count timed (beyond neither noise nor margin)."""
        if self.step_s:
            return fast_enough(trial, self.step_s)
        fastest = _fastest(timed.values())
        return fastest is not None and trial.usable and as_fast(trial, fastest, self.margin, True)

    def _refine_workers(self, timed: dict[int, Trial]) -> None:
        """One count halfway above the fastest, then bisect down to the cheapest enough count."""
        fastest = _fastest(timed.values())
        if fastest is None:
            return
        # With a step time, a count that keeps it fed is enough: the fastest count matters only
        # when none does.
        if not self.step_s or not any(self._enough(t, timed) for t in timed.values()):
            best = fastest.settings.num_workers
            above = [n for n, t in timed.items() if n > best and t.run is not None]
            if above and min(above) - best > 1:
                middle = (best + min(above)) // 2
                timed[middle] = self._time_workers(middle)
        enough = sorted(n for n, t in timed.items() if self._enough(t, timed))
        if not enough:
            return
        high = enough[0]
        low = max((n for n in timed if n < high), default=high)
        while high - low > 1:
            middle = (low + high) // 2
            trial = timed[middle] = self._time_workers(middle)
            if trial.run is None and trial.status != "over memory":
                return  # out of time
            if self._enough(trial, timed):
                high = middle
            else:
                low = middle

    def search_threads(self) -> None:
        """The best worker count with default threads and with ``CPUs // workers`` threads."""
        around = self._around_best()
        if not around.num_workers or "threads" in self.fixed:
            return
        per_worker = max(1, math.floor(self.limits.cpus / around.num_workers + 1e-9))
        for threads in (None, 1, per_worker):
            self.measure(around.model_copy(update={"threads": threads}), "threads")

    def search_prefetch(self) -> None:
        """The best setting with other ``prefetch_factor`` values."""
        around = self._around_best()
        if not around.num_workers or "prefetch_factor" in self.fixed:
            return
        for factor in self.options.prefetch_factors:
            self.measure(around.model_copy(update={"prefetch_factor": factor}), "prefetch")

    def search_pin_memory(self) -> None:
        """Pinned and unpinned batches, when they are copied to a CUDA device."""
        device = self.options.device or ""
        if not device.startswith("cuda") or "pin_memory" in self.fixed:
            return
        around = self._around_best()
        for pin in (False, True):
            self.measure(around.model_copy(update={"pin_memory": pin}), "pin_memory")

    def planned_batches(self) -> int:
        """An upper estimate of the batches the search will time (for the progress bar)."""
        per_trial = self.options.batches + 2 * max(1, self.max_workers)
        worker_trials = len(worker_ladder(self.max_workers))
        if self.max_workers > EVERY_COUNT_UP_TO:
            worker_trials += 1 + math.ceil(math.log2(self.max_workers))
        trials = 1 + worker_trials + 3 + len(self.options.prefetch_factors)
        if (self.options.device or "").startswith("cuda"):
            trials += 2
        return trials * per_trial

"""The loader search: which settings each phase times, how worker counts are searched on machines
with many CPUs, that a setting is timed once, and that settings over the memory left or the time
budget are not started."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset
from tune_trials import search_of, trial

from codedag.plan.loader import LoaderSettings
from codedag.tune.limits import MachineLimits
from codedag.tune.measure import TrialRun
from codedag.tune.search import Search, Trial, settings_key, worker_ladder


class Recording(Search):
    """A search that records what it would time, with made-up intervals per worker count
    (``interval(workers)``; the step waits for whatever the interval exceeds the step by)."""

    interval: Callable[[int], float] = staticmethod(lambda n: 0.1 / (1 + n))  # type: ignore[assignment]

    def measure(self, settings: LoaderSettings, phase: str) -> Trial:
        self.asked: list[tuple[str, LoaderSettings]] = getattr(self, "asked", [])
        self.asked.append((phase, settings))
        interval = self.interval(settings.num_workers)
        wait = max(0.0, interval - (self.step_s or interval))
        made = trial(interval, wait_s=wait, phase=phase, **settings.model_dump())
        self.trials[settings_key(settings)] = made
        return made

    def worker_counts(self) -> list[int]:
        return [s.num_workers for phase, s in self.asked if phase == "workers"]


def _recording(
    cpus: int = 4,
    interval: Callable[[int], float] | None = None,
    step_s: float | None = None,
    **options: Any,
) -> Recording:
    base = search_of(yours=LoaderSettings(), **options)
    limits = MachineLimits(cpus, "test", None, 2**30)
    search = Recording(None, base.yours, base.options, limits, {}, None, lambda _: None, step_s)
    if interval is not None:
        search.interval = interval  # type: ignore[method-assign]
    return search


def test_equal_settings_share_a_key_whatever_their_spelling() -> None:
    assert settings_key(LoaderSettings(num_workers=2, prefetch_factor=2)) == settings_key(
        LoaderSettings(num_workers=2)
    )
    assert settings_key(LoaderSettings(prefetch_factor=4)) == settings_key(LoaderSettings())
    assert settings_key(LoaderSettings(num_workers=1)) != settings_key(LoaderSettings())


def test_a_trial_is_usable_only_when_measured_fully() -> None:
    assert trial(0.1).usable
    assert not Trial(LoaderSettings(), "yours").usable
    short = Trial(LoaderSettings(), "yours", TrialRun(LoaderSettings(), intervals_s=[0.1]))
    assert not short.usable
    stopped = trial(0.1)
    stopped.status = "stopped early"
    failed = trial(0.1)
    failed.run.error = "OSError"  # type: ignore[union-attr]
    assert not stopped.usable and not failed.usable


def test_the_best_is_the_usable_trial_with_the_shortest_interval() -> None:
    fast_but_stopped = trial(0.01, num_workers=3)
    fast_but_stopped.status = "stopped early"
    search = search_of(trial(0.1), trial(0.05, num_workers=1), fast_but_stopped)
    assert search.best().settings.num_workers == 1  # type: ignore[union-attr]
    assert search.trial_of(LoaderSettings(num_workers=3)) is fast_but_stopped


def test_the_phases_vary_one_setting_around_the_best_so_far() -> None:
    search = _recording(max_workers=2, prefetch_factors=(4,))
    search.run()
    asked = [(phase, s.num_workers, s.threads, s.prefetch_factor) for phase, s in search.asked]
    assert asked == [
        ("yours", 0, None, None),
        ("workers", 0, None, None),
        ("workers", 1, 1, None),
        ("workers", 2, 1, None),
        ("threads", 2, None, None),
        ("threads", 2, 1, None),
        ("threads", 2, 2, None),  # 4 CPUs // 2 workers
        ("prefetch", 2, 1, 4),
    ]  # no pin_memory phase without a CUDA device
    assert search.planned_batches() >= 8 * search.options.batches


def test_a_timed_setting_is_not_timed_again() -> None:
    yours = trial(0.1, phase="yours")
    search = search_of(yours)
    assert search.measure(LoaderSettings(), "workers") is yours


def test_workers_that_would_not_fit_in_memory_are_not_started() -> None:
    measured = trial(0.05, num_workers=1)
    measured.run.worker_rss_bytes = 2**29  # type: ignore[union-attr]  # 512 MiB per worker
    search = search_of(trial(0.1), measured)  # 1 GiB left
    over = search.measure(LoaderSettings(num_workers=2), "workers")
    assert over.status == "over memory" and over.run is None
    assert "2 workers would need about 1024 MiB" in over.note


def test_after_the_budget_only_your_settings_are_timed() -> None:
    loader = DataLoader(TensorDataset(torch.arange(64.0)), batch_size=4)
    search = search_of(yours=LoaderSettings(), budget_s=0.0, batches=4)
    search.loader = loader
    late = search.measure(LoaderSettings(num_workers=1), "workers")
    assert late.status == "not measured" and late.run is None
    assert "time budget" in search.budget_note
    yours = search.measure(LoaderSettings(), "yours")
    assert yours.usable and yours.run.batches >= 4  # type: ignore[union-attr]


def test_the_worker_ladder_doubles_above_four_cpus() -> None:
    assert worker_ladder(2) == [0, 1, 2]
    assert worker_ladder(4) == [0, 1, 2, 3, 4]
    assert worker_ladder(5) == [0, 1, 2, 4, 5]
    assert worker_ladder(16) == [0, 1, 2, 4, 8, 16]
    assert worker_ladder(48) == [0, 1, 2, 4, 8, 16, 32, 48]


def test_sixteen_cpus_bisect_down_to_the_cheapest_count_as_fast_as_the_fastest() -> None:
    # Faster up to six workers, flat after: six is the cheapest count as fast as the fastest.
    search = _recording(cpus=16, interval=lambda n: 0.15 if n == 0 else 0.1 / min(n, 6))
    search.search_workers()
    assert search.worker_counts() == [0, 1, 2, 4, 8, 16, 12, 6, 5]
    assert search.trial_of(LoaderSettings(num_workers=6, threads=1)) is not None


def test_the_ladder_stops_once_more_workers_are_not_clearly_faster() -> None:
    # Past four workers they fight over the CPUs: eight are slower, sixteen are never started.
    def interval(n: int) -> float:
        return 0.15 if n == 0 else 0.1 / min(n, 4) * (1 + 0.1 * max(0, n - 4))

    search = _recording(cpus=16, interval=interval)
    search.search_workers()
    assert search.worker_counts() == [0, 1, 2, 4, 8, 6, 3]


def test_with_a_step_time_the_ladder_stops_at_the_first_count_that_feeds_the_step() -> None:
    # 50 ms steps: six workers load a batch in 50 ms and keep the step fed, five (57 ms) do not.
    search = _recording(cpus=16, interval=lambda n: 0.2 / (1 + 0.5 * n), step_s=0.05)
    search.search_workers()
    assert search.worker_counts() == [0, 1, 2, 4, 8, 6, 5]


@pytest.mark.parametrize("cpus", [1, 2, 4])
def test_up_to_four_cpus_every_worker_count_is_timed(cpus: int) -> None:
    search = _recording(cpus=cpus)
    search.search_workers()
    assert search.worker_counts() == list(range(cpus + 1))


@pytest.mark.parametrize(
    ("interval", "counts"),
    [
        (lambda n: 0.1 * (1 + n), [0, 1, 2]),  # more workers: slower
        (lambda n: 0.1 / min(1 + n, 2), [0, 1, 2]),  # one worker is as fast as it gets
        (lambda n: 0.1 / (1 + n) * (1 + 0.04 * n), [0, 1, 2, 3, 4]),  # 5 % and more each
        (lambda n: 0.1 / min(1 + n, 3.1), [0, 1, 2, 3]),  # three gain 3 %: within the margin
    ],
)
def test_the_counts_stop_rising_once_one_is_not_clearly_faster(
    interval: Callable[[int], float], counts: list[int]
) -> None:
    search = _recording(cpus=4, interval=interval)
    search.search_workers()
    assert search.worker_counts() == counts

"""Timing one loader setting: cycle intervals, waits and start-up are recorded, the stop rule
and the loader running out end a trial, and a failing setting is reported, not raised."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Iterator

import pytest

from codedag.plan.loader import LoaderSettings
from codedag.tune.measure import TrialRun, run_trial, sleep_consumer, worker_memory
from codedag.tune.stats import MIN_SAMPLES


def test_every_batch_after_the_first_gives_an_interval_and_a_wait() -> None:
    seen: list[int] = []
    ticks: list[None] = []
    run = run_trial(
        lambda: itertools.count(),
        LoaderSettings(),
        max_batches=6,
        max_s=60.0,
        consumer=seen.append,
        on_batch=lambda: ticks.append(None),
    )
    assert run.batches == 6 and seen == list(range(6)) and len(ticks) == 6
    assert len(run.intervals_s) == 5 and len(run.waits_s) == 5
    assert run.startup_s >= 0 and run.error is None and run.stopped is None
    assert run.worker_rss_bytes == 0  # no workers


def test_the_batch_budget_covers_enough_cycles() -> None:
    run = run_trial(lambda: itertools.count(), LoaderSettings(), max_batches=1, max_s=60.0)
    assert len(run.intervals_s) >= MIN_SAMPLES


def test_a_consumer_slower_than_the_loader_sets_the_interval() -> None:
    run = run_trial(
        lambda: itertools.count(),
        LoaderSettings(),
        max_batches=5,
        max_s=60.0,
        consumer=sleep_consumer(0.01),
    )
    assert run.interval_s >= 0.009 and 0 < run.batches_per_s <= 1 / 0.009
    assert run.wait_s < 0.01  # the loader itself never made it wait


def test_the_stop_rule_ends_a_trial() -> None:
    stopped = run_trial(
        lambda: itertools.count(),
        LoaderSettings(),
        max_batches=50,
        max_s=60.0,
        stop=lambda intervals: "slower than the best" if len(intervals) == 2 else None,
    )
    assert stopped.stopped == "slower than the best" and stopped.batches == 3


def test_the_time_limit_ends_a_trial_once_enough_cycles_are_timed() -> None:
    def slow() -> Iterator[int]:
        for i in itertools.count():
            time.sleep(0.005)
            yield i

    limited = run_trial(slow, LoaderSettings(), max_batches=1000, max_s=0.01)
    assert limited.stopped == "time limit (0.01 s) reached"
    assert len(limited.intervals_s) == MIN_SAMPLES


def test_a_loader_that_runs_out_ends_its_trial() -> None:
    short = run_trial(lambda: iter(range(3)), LoaderSettings(), max_batches=10, max_s=60.0)
    assert short.stopped == "the loader ran out of batches" and short.batches == 3


def test_a_setting_that_cannot_load_is_reported() -> None:
    def broken() -> Iterator[int]:
        yield 1
        raise OSError("worker died")

    run = run_trial(broken, LoaderSettings(), max_batches=5, max_s=60.0)
    assert run.error == "OSError: worker died" and run.batches == 1


def test_summaries_of_a_run() -> None:
    run = TrialRun(LoaderSettings(), intervals_s=[0.1, 0.3, 0.2], waits_s=[0.0, 0.03])
    assert run.interval_s == pytest.approx(0.2)
    assert run.batches_per_s == pytest.approx(5.0)
    assert run.wait_s == pytest.approx(0.015)
    assert TrialRun(LoaderSettings()).batches_per_s == 0.0
    assert worker_memory(iter([])) == (0, 0)  # no worker processes


class _WorkerPids:
    """Each sample is the id of the process that loaded it."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> int:
        return os.getpid()


def test_the_workers_end_with_the_trial_without_a_garbage_collection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A full collection of a large process costs more than a trial: the workers are shut down
    directly, and they end even while the loader that keeps them (persistent) is still held."""
    import gc

    import psutil
    from torch.utils.data import DataLoader

    def no_collection(*_args: object) -> int:
        raise AssertionError("run_trial collected garbage")

    monkeypatch.setattr(gc, "collect", no_collection)
    workers: set[int] = set()
    kept: list[object] = []

    def make_loader() -> DataLoader[int]:
        loader = DataLoader(
            _WorkerPids(),  # type: ignore[arg-type]
            batch_size=4,
            num_workers=1,
            persistent_workers=True,
        )
        kept.append(loader)
        return loader

    def note_workers(batch: object) -> None:
        workers.update(int(pid) for pid in batch)  # type: ignore[attr-defined]

    run = run_trial(
        make_loader,
        LoaderSettings(num_workers=1, persistent_workers=True),
        max_batches=6,
        max_s=60.0,
        consumer=note_workers,
    )
    assert run.error is None and run.batches >= 6
    assert len(workers) == 1 and os.getpid() not in workers
    for pid in workers:
        assert not psutil.pid_exists(pid) or psutil.Process(pid).status() == psutil.STATUS_ZOMBIE

"""Counters of forked children: summed in the owner, never blocking, whatever the children do."""

from __future__ import annotations

import logging
import multiprocessing
import os
import signal
import time
from collections.abc import Callable, Iterator
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from migrate_support import call_within, make_registry, plan_for, wait_until
from torch.utils.data import DataLoader, Dataset

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.workerstats import WorkerStats

FORK = multiprocessing.get_context("fork")
COUNTS: dict[str, int] = {"a": 0, "b": 0}


def _read(name: str) -> dict[str, int]:
    return {"calls": COUNTS[name], "state": COUNTS[name] % 3}


def _count_and_exit(name: str, calls: int) -> None:
    for _ in range(calls):
        COUNTS[name] += 1


@pytest.fixture
def stats() -> Iterator[Callable[..., WorkerStats]]:
    made: list[WorkerStats] = []

    def make(**kwargs: Any) -> WorkerStats:
        kwargs.setdefault("publish_interval_s", 0.02)
        kwargs.setdefault("cumulative", ("calls",))
        made.append(WorkerStats(["a", "b"], _read, ("calls", "state"), **kwargs))
        return made[-1]

    yield make
    for instance in made:
        instance.stop_tracking()


def _run_child(target: Callable[..., None], *args: Any) -> int:
    process = FORK.Process(target=target, args=args)
    process.start()
    process.join(30)
    assert process.exitcode is not None
    return process.exitcode


def test_children_that_exit_normally_are_summed(stats: Callable[..., WorkerStats]) -> None:
    workers = stats()
    COUNTS["a"] = 100  # counted before the fork: not the children's
    for calls in (3, 4):
        assert _run_child(_count_and_exit, "a", calls) == 0
    assert workers.totals("a") == {"calls": 7}
    assert workers.totals("b") == {"calls": 0}
    assert workers.totals("not listed") == {"calls": 0}
    rows = workers.children("a")
    assert sorted(r["calls"] for r in rows) == [3, 4]
    assert all(r["pid"] > 0 for r in rows)
    # a state field is reported as the child left it, not since the fork
    assert sorted(r["state"] for r in rows) == [(100 + 3) % 3, (100 + 4) % 3]


def test_slots_of_ended_children_are_reused(stats: Callable[..., WorkerStats]) -> None:
    workers = stats(slots=2)
    for _ in range(6):
        assert _run_child(_count_and_exit, "b", 2) == 0
    assert workers.totals("b")["calls"] == 12
    assert len(workers.children("b")) == 6


def _count_and_sleep(name: str, calls: int) -> None:
    _count_and_exit(name, calls)
    time.sleep(60)


def test_killed_children_keep_what_they_published(stats: Callable[..., WorkerStats]) -> None:
    workers = stats()
    process = FORK.Process(target=_count_and_sleep, args=("a", 5))
    process.start()
    try:
        wait_until(lambda: workers.totals("a")["calls"] == 5, "the child's first publication")
    finally:
        process.kill()
        process.join(10)
    assert call_within(5, lambda: workers.totals("a")) == {"calls": 5}


def test_more_children_than_slots_warn_and_never_block(
    stats: Callable[..., WorkerStats], caplog: pytest.LogCaptureFixture
) -> None:
    workers = stats(slots=1)
    processes = [FORK.Process(target=_count_and_sleep, args=("a", 2)) for _ in range(2)]
    with caplog.at_level(logging.WARNING, logger="codedag.migrate.workerstats"):
        for process in processes:
            process.start()
    try:
        wait_until(lambda: workers.totals("a")["calls"] == 2, "one child's publication")
    finally:
        for process in processes:
            process.kill()
            process.join(10)
    assert "are not reported" in caplog.text
    assert workers.totals("a")["calls"] == 2  # the second child had no slot


# -- through the migrator: real pools and DataLoader workers -----------------------------------
GET = f"{__name__}.flip_one"


def flip_one(seed: int) -> int:
    """A worker task calling a patched cv2 function (the plan places calls made here)."""
    image = np.random.default_rng(seed).integers(0, 256, (8, 10, 3), dtype=np.uint8)
    return int(cv2.flip(image, 1)[0, 0, 0])


def _migrated_in_workers(migrator: PipelineMigrator) -> int:
    return int(migrator.get_stats()["functions"]["cv2.flip"]["in_workers"]["migrated"])


@pytest.mark.timeout(120)
def test_a_terminated_pool_of_four_never_blocks_get_stats() -> None:
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu"})
    with PipelineMigrator.from_plan(plan, registry=make_registry(), guard=False) as migrator:
        pool = FORK.Pool(4)
        try:
            results = pool.map(flip_one, range(40), chunksize=1)
            wait_until(lambda: _migrated_in_workers(migrator) == 40, "the workers' counts")
        finally:
            pool.terminate()  # SIGTERM: no worker runs its exit handlers
            pool.join()
        stats = call_within(10, migrator.get_stats)
    assert results == [flip_one(i) for i in range(40)]
    assert stats["functions"]["cv2.flip"]["in_workers"]["migrated"] == 40
    assert stats["functions"]["cv2.flip"]["migrated"] == 40
    # a pool terminated while it works: the counts are partial, reading them still never blocks
    with PipelineMigrator.from_plan(plan, registry=make_registry(), guard=False) as migrator:
        pool = FORK.Pool(4)
        pending = pool.map_async(flip_one, range(4000), chunksize=1)
        time.sleep(0.3)
        pool.terminate()
        pool.join()
        stats = call_within(10, migrator.get_stats)
    del pending
    assert 0 <= stats["functions"]["cv2.flip"]["in_workers"]["migrated"] <= 4000


def clip_with_casting(seed: int) -> float:
    """A worker task whose migrated call falls back (the backend refuses ``casting=``)."""
    values = np.random.default_rng(seed).random(16)
    return float(np.clip(values, 0.2, 0.8, casting="unsafe").sum())


@pytest.mark.timeout(120)
def test_every_fallback_counted_in_workers_keeps_its_reason() -> None:
    plan = {"context_device_map": {f"{__name__}.clip_with_casting#0/numpy.clip#0": "cpu"}}
    with PipelineMigrator.from_plan(plan, guard=False) as migrator:
        pool = FORK.Pool(4)
        try:
            results = pool.map(clip_with_casting, range(40), chunksize=1)
            wait_until(
                lambda: _clip_calls(migrator) == 40,
                "the workers' counts",
            )
        finally:
            pool.terminate()
            pool.join()
        row = call_within(10, migrator.get_stats)["functions"]["numpy.clip"]
    assert results == [clip_with_casting(i) for i in range(40)]
    fell_back = row["in_workers"]["fell_back"]
    assert fell_back == row["fell_back"] > 0  # a call site that keeps failing is then given up
    assert sum(row["fallback_reasons"].values()) == fell_back, row["fallback_reasons"]
    assert all("casting" in reason for reason in row["fallback_reasons"])


def _clip_calls(migrator: PipelineMigrator) -> int:
    row = migrator.get_stats()["functions"]["numpy.clip"]
    return int(row["fell_back"] + row["passed_through"])


def test_labels_past_the_text_area_are_counted_as_other_reasons(
    stats: Callable[..., WorkerStats],
) -> None:
    from codedag.migrate.workerstats import LABEL_BYTES, OTHER

    many = {f"reason {i} " + "x" * 150: 1 for i in range(LABEL_BYTES // 100)}
    workers = stats(labels=lambda: {"a": many})
    assert _run_child(_publish_labels) == 0
    totals = workers.label_totals("a")
    assert sum(totals.values()) == len(many) and totals[OTHER] > 0


def _publish_labels() -> None:
    from codedag.migrate.workerstats import publish_now

    publish_now()


class KillingDataset(Dataset):
    """Flips images; the worker that loads sample ``kill_at`` dies by SIGKILL."""

    def __init__(self, kill_at: int) -> None:
        self.kill_at = kill_at

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> torch.Tensor:
        if index == self.kill_at:
            time.sleep(0.5)  # let this worker publish what it counted so far
            os.kill(os.getpid(), signal.SIGKILL)
        return torch.from_numpy(np.ascontiguousarray(flip_one(index) + np.zeros(1)))


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_a_killed_dataloader_worker_never_blocks_get_stats() -> None:
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu"})
    loader = DataLoader(
        KillingDataset(kill_at=40), batch_size=4, num_workers=2, multiprocessing_context=FORK
    )
    seen = 0
    with PipelineMigrator.from_plan(plan, registry=make_registry(), guard=False) as migrator:
        with pytest.raises(RuntimeError, match="DataLoader worker"):
            for batch in loader:
                seen += len(batch)
        stats = call_within(10, migrator.get_stats)
    migrated = stats["functions"]["cv2.flip"]["in_workers"]["migrated"]
    assert seen <= migrated <= 64  # everything delivered was counted; the dead worker's too

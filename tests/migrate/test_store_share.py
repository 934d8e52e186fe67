"""The storing share: a first epoch stores what keeps storing within its share of the loading
time, leaves the other values for a later epoch, and that epoch's hits pay for storing them."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefix_support import FileImages, epoch, equal, runtime, write_images

from codedag.migrate.cache.session import WRITE_NS_PER_BYTE, _StoreBudget

MS = 1_000_000


@pytest.fixture
def images(tmp_path: Path) -> list[str]:
    return write_images(tmp_path / "images", n=8)


def _with_share(folder: Path, share: float):  # type: ignore[no-untyped-def]
    # judged after more values than an epoch has: only the share decides what is stored
    return runtime(folder, judge_after=1000, store_share=share)


@pytest.mark.parametrize("workers", [0, 2])
def test_past_its_share_a_first_epoch_stores_only_what_it_can_afford(
    tmp_path: Path, images: list[str], workers: int
) -> None:
    # a share of almost nothing: each process affords its first value (nothing spent yet) and
    # no other, as no hit has saved anything in a first epoch
    dataset = FileImages(images)
    reference = epoch(dataset, workers)
    rt = _with_share(tmp_path / "cache", 1e-12)
    rt.apply()
    try:
        first = epoch(dataset, workers)
    finally:
        rt.restore()
    stats = rt.stats()
    assert equal(first, reference)  # every value delivered, stored or not
    processes = max(workers, 1)
    assert stats["stored"] == processes
    assert stats["not_stored_later"] == len(images) - processes
    assert stats["misses"] == {"new": len(images)}
    # a run that may store everything stores what was left and reads back what was stored
    again = runtime(tmp_path / "cache")
    again.apply()
    try:
        second, third = epoch(dataset, workers), epoch(dataset, workers)
    finally:
        again.restore()
    assert equal(second, reference) and equal(third, reference)
    counts = again.stats()
    assert counts["hits"] == processes + len(images)
    assert counts["stored"] == len(images) - processes and counts["not_stored_later"] == 0


def test_a_share_of_zero_stores_every_value_in_the_epoch_that_computes_it(
    tmp_path: Path, images: list[str]
) -> None:
    rt = _with_share(tmp_path / "cache", 0.0)
    rt.apply()
    try:
        epoch(FileImages(images))
    finally:
        rt.restore()
    stats = rt.stats()
    assert stats["stored"] == len(images) and stats["not_stored_later"] == 0


def test_the_budget_allows_its_share_of_the_loading_time_and_what_hits_saved() -> None:
    budget = _StoreBudget()
    assert budget.affords("c", 5 * MS, 10 * MS, 0.03)  # nothing spent yet
    budget.queued(b"k1", 500_000, 10_000)  # 0.5 MB: estimated until written
    estimate = int(500_000 * WRITE_NS_PER_BYTE)
    assert budget.spent_ns == 10_000 + estimate
    budget.loading_ns = 10 * MS
    assert not budget.affords("c", 5 * MS, 0, 0.03)  # 0.3 ms allowed, 0.36 ms spent
    assert budget.affords("c", 5 * MS, 2 * MS, 0.03)  # 12 ms of loading: 0.36 ms allowed
    budget.written(b"k1", 1 * MS)  # the write took more than estimated
    assert budget.spent_ns == 10_000 + 1 * MS
    assert not budget.affords("c", 5 * MS, 2 * MS, 0.03)
    budget.hit("c", 100_000)  # a hit saves computing the chain (5 ms on average) less its read
    assert budget.affords("c", 5 * MS, 0, 0.03)
    budget.queued(b"k2", 500_000, 10_000)  # later writes are estimated at the measured rate
    assert budget.estimates[b"k2"] == (500_000, 1 * MS)


def test_a_hit_of_a_chain_never_computed_here_saves_nothing_yet() -> None:
    budget = _StoreBudget()
    budget.queued(b"k", 100_000, 0)
    budget.hit("other", 0)
    assert not budget.affords("c", 1 * MS, 0, 0.03)

"""The storing share: a first epoch stores what keeps storing within its share of the loading
time and leaves the other values for the next epoch, which stores every value it computes."""

from __future__ import annotations

from pathlib import Path

import pytest
from prefix_support import FileImages, epoch, equal, runtime, write_images

from codedag.migrate.cache import keys
from codedag.migrate.cache.session import WRITE_NS_PER_BYTE, _StoreBudget

MS = 1_000_000


@pytest.fixture
def images(tmp_path: Path) -> list[str]:
    return write_images(tmp_path / "images", n=8)


def _totals(rt) -> dict[str, int]:  # type: ignore[no-untyped-def]
    stats = rt.stats()
    return {"hits": stats["hits"], "stored": stats["stored"], "later": stats["not_stored_later"]}


@pytest.mark.parametrize("workers", [0, 2])
def test_a_first_epoch_stores_its_share_and_the_next_epoch_the_rest(
    tmp_path: Path, images: list[str], workers: int
) -> None:
    # a share of almost nothing: in the first epoch each process affords its first value
    # (nothing spent yet) and no other; the second epoch finds the chain warm and stores the rest
    dataset = FileImages(images)
    reference = epoch(dataset, workers)
    rt = runtime(tmp_path / "cache", judge_after=1000, store_share=1e-12)
    processes = max(workers, 1)
    n = len(images)
    rt.apply()
    try:
        per_epoch = []
        before = {"hits": 0, "stored": 0, "later": 0}
        for _ in range(3):
            assert equal(epoch(dataset, workers), reference)  # every value delivered
            now = _totals(rt)
            per_epoch.append({k: now[k] - before[k] for k in now})
            before = now
    finally:
        rt.restore()
    assert per_epoch == [
        {"hits": 0, "stored": processes, "later": n - processes},
        {"hits": processes, "stored": n - processes, "later": 0},
        {"hits": n, "stored": 0, "later": 0},
    ]


def test_a_value_left_for_later_costs_no_cache_work(
    tmp_path: Path, images: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # past the share, a cold chain's source is the library's own call: its key is never
    # computed (nor its stand-ins); the next epoch follows every sample again
    keyed: list[object] = []
    source_key = keys.source_key
    monkeypatch.setattr(keys, "source_key", lambda *a: keyed.append(a) or source_key(*a))
    dataset = FileImages(images)
    reference = epoch(dataset)
    rt = runtime(tmp_path / "cache", judge_after=1000, store_share=1e-12)
    rt.apply()
    try:
        assert equal(epoch(dataset), reference)
        first = len(keyed)
        assert equal(epoch(dataset), reference)
    finally:
        rt.restore()
    n = len(images)
    assert first == 1  # the first value only: it was stored
    assert len(keyed) - first == n
    stats = rt.stats()
    assert stats["not_stored_later"] == n - 1 and stats["hits"] == 1


def test_a_share_of_zero_stores_every_value_in_the_epoch_that_computes_it(
    tmp_path: Path, images: list[str]
) -> None:
    rt = runtime(tmp_path / "cache", judge_after=1000, store_share=0.0)
    rt.apply()
    try:
        epoch(FileImages(images))
    finally:
        rt.restore()
    stats = rt.stats()
    assert stats["stored"] == len(images) and stats["not_stored_later"] == 0


def test_the_budget_allows_its_share_of_the_loading_time() -> None:
    budget = _StoreBudget()
    assert budget.affords(10 * MS, 0.03)  # nothing spent yet
    budget.queued(b"k1", 500_000, 10_000)  # 0.5 MB: estimated until written
    estimate = int(500_000 * WRITE_NS_PER_BYTE)
    assert budget.spent_ns == 10_000 + estimate
    budget.loading_ns = 10 * MS
    assert not budget.affords(0, 0.03)  # 0.3 ms allowed, 0.36 ms spent
    assert budget.affords(2 * MS, 0.03)  # 12 ms of loading: 0.36 ms allowed
    budget.written(b"k1", 1 * MS)  # the write took more than estimated
    assert budget.spent_ns == 10_000 + 1 * MS
    assert not budget.affords(2 * MS, 0.03)
    budget.queued(b"k2", 500_000, 10_000)  # later writes are estimated at the measured rate
    assert budget.estimates[b"k2"] == (500_000, 1 * MS)
    budget.written(b"unknown", 5 * MS)  # a value queued before the budget counted: ignored
    assert budget.spent_ns == 20_000 + 2 * MS

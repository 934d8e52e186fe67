"""A first epoch on a store that holds no value of a chain computes its samples without lookups;
every later epoch, and a run on a store that holds values, looks them up as before."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from prefix_support import FileImages, count_store_reads, epoch, equal, runtime, write_images


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls of the store's reads, by name."""
    return count_store_reads(monkeypatch)


class Repeated(FileImages):
    """Each file twice in one epoch (a mosaic's images, a sampler with replacement)."""

    def __len__(self) -> int:
        return 2 * len(self.paths)

    def __getitem__(self, index: int) -> Any:
        image, _ = super().__getitem__(index % len(self.paths))
        return image, index


def test_epochs_back_to_back_hit_values_still_queued(tmp_path: Path, reads: Counter[str]) -> None:
    """Epoch 2 in the same process looks up again before the writer stored anything."""
    dataset = FileImages(write_images(tmp_path / "images", n=6))
    reference = epoch(dataset)
    rt = runtime(tmp_path / "cache")
    rt.apply()
    try:
        assert equal(epoch(dataset), reference)
        first = dict(reads)
        assert equal(epoch(dataset), reference)  # no flush: values may still be queued
    finally:
        rt.restore()
    stats = rt.stats()
    assert first == {"flag": 1}  # no header, no value looked up in the first epoch
    assert stats["misses"] == {"new": 6} and stats["hits"] == 6
    assert rt.session.cold_skips == 6


def test_a_run_on_a_store_holding_values_looks_them_up_from_its_first_sample(
    tmp_path: Path, reads: Counter[str]
) -> None:
    dataset = FileImages(write_images(tmp_path / "images", n=5))
    reference = epoch(dataset)
    for run in range(2):
        rt = runtime(tmp_path / "cache")
        rt.apply()
        try:
            reads.clear()
            assert equal(epoch(dataset), reference)
        finally:
            rt.restore()
        stats = rt.stats()
        if run == 0:
            assert stats["misses"] == {"new": 5} and reads == {"flag": 1}
        else:  # the flag stored with the first value: every sample looked up, and found
            assert stats["hits"] == 5 and not stats["misses"]
            assert reads["flag"] == 1 and reads["get"] == 5
            assert rt.session.cold_skips == 0


def test_a_source_met_twice_in_a_cold_epoch_is_looked_up_and_hit(tmp_path: Path) -> None:
    dataset = Repeated(write_images(tmp_path / "images", n=4))
    reference = epoch(dataset)
    rt = runtime(tmp_path / "cache")
    rt.apply()
    try:
        assert equal(epoch(dataset), reference)
    finally:
        rt.restore()
    stats = rt.stats()
    assert stats["misses"] == {"new": 4} and stats["hits"] == 4
    assert rt.session.cold_skips == 4


def test_workers_of_a_first_epoch_skip_lookups_and_the_next_epoch_hits(tmp_path: Path) -> None:
    dataset = FileImages(write_images(tmp_path / "images", n=8))
    reference = epoch(dataset)
    rt = runtime(tmp_path / "cache")
    rt.apply()
    try:
        assert equal(epoch(dataset, workers=2), reference)
        assert equal(epoch(dataset, workers=2), reference)
        assert equal(epoch(dataset), reference)  # the main process: the workers' values
    finally:
        rt.restore()
    stats = rt.stats()
    assert stats["misses"] == {"new": 8} and stats["hits"] == 16


def test_persistent_workers_look_up_again_in_their_next_epoch(tmp_path: Path) -> None:
    from torch.utils.data import DataLoader

    dataset = FileImages(write_images(tmp_path / "images", n=8))
    reference = epoch(dataset)
    rt = runtime(tmp_path / "cache")
    rt.apply()
    try:
        loader = DataLoader(dataset, batch_size=4, num_workers=2, persistent_workers=True)
        for _ in range(2):  # the same worker processes, a new fetcher each epoch
            assert equal([images.clone() for images, _ in loader], reference)
        del loader
    finally:
        rt.restore()
    stats = rt.stats()
    assert stats["misses"] == {"new": 8} and stats["hits"] == 8

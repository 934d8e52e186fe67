"""Epochs the prefix cache serves switch to the plan's warm loader settings, and back."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
import torch
from prefix_support import FileImages, cache_section, equal, write_images
from torch.utils.data import DataLoader

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.cache.runtime import CacheProgress, CacheSettings
from codedag.migrate.warm_loader import WarmSwitch
from codedag.migrate.worker_threads import WorkerThreads
from codedag.plan.loader import LoaderSection, LoaderSettings, WarmLoader
from codedag.store.tiers import StoreSettings

TWO = LoaderSettings(num_workers=2, threads=1, persistent_workers=True)
NONE = LoaderSettings()


def _warm(chosen: LoaderSettings = NONE, cold: LoaderSettings = TWO) -> WarmLoader:
    return WarmLoader(chosen=chosen, changed=list(chosen.differences(cold)))


class _Counts:
    """A stand-in for the cache's counts, moved by hand between epochs."""

    def __init__(self) -> None:
        self.now = CacheProgress(0, 0, 0, 0)

    def epoch(self, lookups: int, hits: int, ready: int) -> None:
        a, b, c, d = self.now
        self.now = CacheProgress(a + lookups, b + hits, c + ready, d)


def _loader(workers: int = 2) -> DataLoader[Any]:
    return DataLoader(list(range(8)), batch_size=4, num_workers=workers, persistent_workers=True)


def test_the_second_epoch_switches_once_the_first_was_stored() -> None:
    counts = _Counts()
    switch = WarmSwitch(_warm(), lambda: counts.now)
    loader = _loader()
    keys = switch.switchable(set(), set())
    assert keys == {"num_workers", "threads"}  # persistent_workers is fixed at creation
    assert not switch.before_epoch(loader, keys)  # the first epoch: nothing known yet
    assert loader.num_workers == 2
    counts.epoch(lookups=8, hits=0, ready=8)  # every value queued for storing
    assert switch.before_epoch(loader, keys)
    assert loader.num_workers == 0
    counts.epoch(lookups=8, hits=8, ready=8)
    assert switch.before_epoch(loader, keys)  # still served: stays warm
    assert switch.stats()["warm_epochs"] == 2 and switch.stats()["switches"] == 1


def test_an_epoch_the_cache_did_not_hold_keeps_the_loader_as_it_is() -> None:
    counts = _Counts()
    switch = WarmSwitch(_warm(), lambda: counts.now)
    loader = _loader()
    keys = switch.switchable(set(), set())
    switch.before_epoch(loader, keys)
    counts.epoch(lookups=8, hits=0, ready=6)  # a quarter not stored (the store was full)
    assert not switch.before_epoch(loader, keys)
    counts.epoch(lookups=3, hits=0, ready=3)  # an epoch left after 3 samples
    assert not switch.before_epoch(loader, keys)
    assert loader.num_workers == 2


def test_a_warm_epoch_that_misses_ends_the_switching_and_puts_the_loader_back(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="codedag.migrate.warm_loader")
    counts = _Counts()
    switch = WarmSwitch(_warm(), lambda: counts.now)
    loader = _loader()
    keys = switch.switchable(set(), set())
    switch.before_epoch(loader, keys)
    list(loader)  # persistent workers started
    assert loader._iterator is not None
    counts.epoch(lookups=8, hits=0, ready=8)
    assert switch.before_epoch(loader, keys)
    assert loader._iterator is None  # the persistent workers were shut down before switching
    assert [b.tolist() for b in loader] == [[0, 1, 2, 3], [4, 5, 6, 7]]
    counts.epoch(lookups=8, hits=2, ready=8)  # evicted meanwhile: 2 hits of 8
    assert not switch.before_epoch(loader, keys)
    assert loader.num_workers == 2
    counts.epoch(lookups=8, hits=0, ready=8)
    assert not switch.before_epoch(loader, keys)  # stopped for good
    assert "2 of 8 values" in caplog.text
    assert "2 of 8" in next(iter(switch.stats()["stopped"].values()))


def test_explicit_settings_are_switched_only_where_the_plan_overrides_them() -> None:
    switch = WarmSwitch(_warm(), lambda: CacheProgress(0, 0, 0, 0))
    assert "num_workers" not in switch.switchable({"num_workers"}, set())
    assert "num_workers" in switch.switchable({"num_workers"}, {"num_workers"})
    assert not switch.before_epoch(_loader(), frozenset())


def test_threads_and_prefetch_are_switched_and_restored() -> None:
    counts = _Counts()
    warm = LoaderSettings(num_workers=1, threads=2, prefetch_factor=4)
    switch = WarmSwitch(_warm(warm), lambda: counts.now)
    user_init = print
    loader = DataLoader(list(range(8)), batch_size=4, num_workers=2, worker_init_fn=user_init)
    keys = switch.switchable(set(), set())
    switch.before_epoch(loader, keys)
    counts.epoch(lookups=8, hits=0, ready=8)
    assert switch.before_epoch(loader, keys)
    assert (loader.num_workers, loader.prefetch_factor) == (1, 4)
    assert isinstance(loader.worker_init_fn, WorkerThreads)
    assert loader.worker_init_fn.threads == 2 and loader.worker_init_fn.user_init is user_init
    assert switch.restore_loaders() == 1
    assert (loader.num_workers, loader.prefetch_factor, loader.worker_init_fn) == (
        2,
        2,
        user_init,
    )


def _plan(warm: WarmLoader, cold: LoaderSettings) -> dict[str, Any]:
    section = LoaderSection(
        chosen=cold,
        yours=NONE,
        changed=list(cold.differences(NONE)),
        warm=warm,
        dataset=f"{FileImages.__module__}.{FileImages.__qualname__}",
        draws=[],  # FileImages draws nothing: every setting keeps its batches
    )
    loader = section.model_dump(mode="json")
    return {"context_device_map": {}, "loader": loader, "cache": cache_section()}


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("new_loader_each_epoch", [False, True])
def test_a_plan_loads_epochs_the_cache_serves_in_process_with_identical_batches(
    tmp_path: Path, new_loader_each_epoch: bool
) -> None:
    dataset = FileImages(write_images(tmp_path / "images"))
    reference = [b.clone() for b, _ in DataLoader(dataset, batch_size=4)]
    cold = LoaderSettings(num_workers=2, persistent_workers=True)
    plan = _plan(_warm(NONE, cold), cold)
    store = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=64 << 20)
    settings = CacheSettings(store=store, judge_after=0)
    workers_seen, batches = [], []
    with PipelineMigrator(plan, guard=False, cache=settings) as migrator:
        loader = DataLoader(dataset, batch_size=4)
        for _ in range(3):
            if new_loader_each_epoch:
                loader = DataLoader(dataset, batch_size=4)
            batches.append([b.clone() for b, _ in loader])
            workers_seen.append(loader.num_workers)
        stats = migrator.get_stats()
    assert workers_seen == [2, 0, 0]
    assert all(equal(epoch, reference) for epoch in batches)
    assert stats["cache"]["misses"] == {"new": len(dataset)}
    assert stats["cache"]["hits"] == 2 * len(dataset)
    warm = stats["loader"]["warm"]
    assert (warm["cold_epochs"], warm["warm_epochs"]) == (1, 2)
    assert loader.num_workers == 2  # put back as it was created, when the plan ends
    assert torch.equal(batches[-1][0], reference[0])


def test_an_explicit_setting_kept_from_the_warm_switch_is_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from codedag.migrate.loader_settings import LoaderSettingsPatch

    warm = _warm()
    section = LoaderSection(chosen=TWO, yours=TWO, warm=warm, reason="r", draws=["random"])
    patch = LoaderSettingsPatch(section, cuda_available=False, cpus=2)
    patch.watch_cache(lambda: CacheProgress(0, 0, 0, 0))

    class Loader:
        pass

    caplog.set_level(logging.INFO, logger="codedag.migrate.loader_settings")
    with caplog.at_level(logging.INFO):
        for _ in range(2):
            loader = Loader()
            patch.defaults({"self": loader, "dataset": [1], "num_workers": 2})
    assert patch._warm_keys[loader] == {"threads"}  # num_workers explicit; persistent is fixed
    assert caplog.text.count("your explicit num_workers is kept in the epochs") == 1
    assert "--override num_workers" in caplog.text
    assert patch.stats()["kept_explicit"] == {"warm num_workers": 2}


def test_warm_settings_past_this_machine_are_lowered_like_the_first_epochs() -> None:
    switch = WarmSwitch(_warm(LoaderSettings(num_workers=64, threads=16)), lambda: _Counts().now)
    changes = switch.bound(2)
    assert changes == ["num_workers=64 lowered to 8", "threads=16 lowered to 2"]
    assert (switch.warm.chosen.num_workers, switch.warm.chosen.threads) == (8, 2)
    assert switch.bound(2) == []

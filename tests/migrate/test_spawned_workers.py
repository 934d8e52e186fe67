"""DataLoader workers started with 'spawn' or 'forkserver' apply the plan themselves."""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import pickle
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from batched_support import Augmented, images, run, seed_worker
from migrate_support import plan_for
from prefix_support import DrawingFiles, cache_section, write_images
from torch.utils.data import DataLoader

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.cache.runtime import CacheSettings
from codedag.migrate.spawned_workers import (
    HOOK,
    CountsFolder,
    PlanInWorker,
    SpawnedWorkers,
    WorkerPlan,
    forgone_gain_s,
)
from codedag.store.tiers import StoreSettings


class _Loader:
    """What ``_get_iterator`` reads of a DataLoader."""

    def __init__(self, workers: int, context: Any) -> None:
        self.num_workers = workers
        self.multiprocessing_context = context
        self.worker_init_fn = _own_init


def _own_init(worker_id: int) -> None:
    """A program's own worker_init_fn."""


def _mark(folder: Path, worker_id: int) -> None:
    """A program's own worker_init_fn that leaves a trace of each call."""
    folder.mkdir(exist_ok=True)
    count = len(list(folder.iterdir()))
    (folder / f"{count}-worker{worker_id}").touch()


def _plan(folder: Path) -> tuple[dict[str, Any], CacheSettings]:
    store = StoreSettings(folder=folder, ram_budget_bytes=16 << 20, disk_budget_bytes=0)
    return {**plan_for({}), "cache": cache_section()}, CacheSettings(store=store, judge_after=0)


def test_only_workers_that_inherit_nothing_receive_the_plan_and_the_loader_keeps_its_own() -> None:
    plan = WorkerPlan(plan_for({}), "cpu", None, None, None, False)  # nothing to count
    seen: list[Any] = []
    part = SpawnedWorkers(lambda: plan)
    layer = part.layer(HOOK, lambda loader: seen.append(loader.worker_init_fn))
    for workers, context in ((0, "spawn"), (2, multiprocessing.get_context("fork"))):
        layer(_Loader(workers, None if context == "spawn" else context))
    assert seen == [_own_init, _own_init] and part.handed == 0
    for method in ("spawn", "forkserver"):
        loader = _Loader(2, multiprocessing.get_context(method))
        layer(loader)
        handed = seen[-1]
        assert isinstance(handed, PlanInWorker) and handed.own is _own_init
        assert dataclasses.replace(handed.plan, counts_folder=None) == plan
        assert handed.plan.counts_folder == str(part.counted.path)  # type: ignore[union-attr]
        assert loader.worker_init_fn is _own_init
    assert part.handed == 2
    part.after_restore()  # the counts folder removed
    nothing = SpawnedWorkers(lambda: None).layer(HOOK, lambda loader: loader.worker_init_fn)
    assert nothing(_Loader(2, multiprocessing.get_context("spawn"))) is _own_init


class _Sized(_Loader):
    """A loader over ``samples`` samples, its workers made afresh or persistent."""

    def __init__(self, samples: int | None, persistent: bool = False) -> None:
        super().__init__(2, multiprocessing.get_context("spawn"))
        self.dataset = list(range(samples)) if samples is not None else iter(())
        self.persistent_workers = persistent


def test_workers_made_afresh_each_epoch_get_the_plan_only_where_it_saves_them_more(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def plan(saved_ns: int | None) -> WorkerPlan:
        return WorkerPlan(plan_for({}), "cpu", None, None, None, True, None, saved_ns)

    assert forgone_gain_s(_Sized(100), plan(1_000_000)) == pytest.approx(0.05)  # 50 x 1 ms
    assert forgone_gain_s(_Sized(100), plan(20_000_000)) is None  # 1 s each: worth it
    assert forgone_gain_s(_Sized(100, persistent=True), plan(1_000_000)) is None  # paid once
    assert forgone_gain_s(_Sized(None), plan(1_000_000)) is None  # a length unknown
    assert forgone_gain_s(_Sized(100), plan(None)) is None  # a plan saying nothing of it
    cheap = plan(1_000_000)
    part = SpawnedWorkers(lambda: cheap)
    part.after_patching({})
    layer = part.layer(HOOK, lambda loader: loader.worker_init_fn)
    with caplog.at_level("WARNING", logger="codedag.migrate.spawned_workers"):
        assert layer(_Sized(100)) is _own_init and layer(_Sized(100)) is _own_init
        assert isinstance(layer(_Sized(100, persistent=True)), PlanInWorker)
    assert (part.forgone, part.handed) == (2, 1)
    assert len(caplog.records) == 1
    assert "save each about 0.05 s" in caplog.text and "persistent_workers=True" in caplog.text


def test_settings_that_cannot_travel_leave_workers_unpatched_with_one_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    plan = WorkerPlan(plan_for({}), "cpu", lambda: None, None, None, True)  # not picklable
    part = SpawnedWorkers(lambda: plan)
    part.after_patching({})
    layer = part.layer(HOOK, lambda loader: loader.worker_init_fn)
    with caplog.at_level("WARNING", logger="codedag.migrate.spawned_workers"):
        for _ in range(3):
            assert layer(_Loader(2, multiprocessing.get_context("spawn"))) is _own_init
    assert len(caplog.records) == 1 and "cannot be sent" in caplog.text
    assert part.handed == 0


def test_counts_files_are_summed_and_what_is_not_a_count_is_passed_over() -> None:
    counted = CountsFolder({"hits": 1})
    try:
        assert counted.path.stat().st_mode & 0o077 == 0  # private to this user
        (counted.path / "1.json").write_text('{"hits": 3, "stored": 2}')
        (counted.path / "2.json").write_text('{"hits": 4, "stored": true, "queued": -5}')
        (counted.path / "3.json").write_text("[1, 2]")  # not a map of counts
        (counted.path / "4.json").write_text('{"hits": ' + "9" * 70_000 + "}")  # over the cap
        (counted.path / "5.json").write_text("{half")
        assert counted.totals() == {"hits": 8, "stored": 2}
    finally:
        counted.close()
    assert counted.closed and not counted.path.exists()
    assert counted.totals() == {"hits": 8, "stored": 2}  # kept after the folder is gone


def test_a_counts_folder_left_open_is_removed_when_the_program_exits() -> None:
    script = (
        "from codedag.migrate.spawned_workers import CountsFolder\n"
        "counted = CountsFolder()\n"
        "print(counted.path)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    left = Path(done.stdout.strip())
    assert left.name.startswith("codedag-worker-counts-") and not left.exists()


def test_a_migrator_with_nothing_for_workers_hands_them_nothing(tmp_path: Path) -> None:
    with PipelineMigrator(plan_for({}), guard=False) as migrator:
        assert migrator._worker_plan() is None
    plan, settings = _plan(tmp_path / "cache")
    with PipelineMigrator(plan, guard=False, cache=settings) as migrator:
        shipped = migrator._worker_plan()
        assert shipped is not None
        again = pickle.loads(pickle.dumps(PlanInWorker(shipped, _own_init)))
        assert again.plan.cache.store.folder == tmp_path / "cache"
        assert again.plan.cache.run == migrator.cache.run != ""  # its workers join its generation
        assert again.plan.plan.loader is None


@pytest.mark.slow
@pytest.mark.parametrize("persistent", [False, True])
def test_spawned_workers_store_and_hit_with_the_loaders_own_batches(
    tmp_path: Path, persistent: bool
) -> None:
    """The first epoch's spawned worker stores every value, the second's reads them back, the
    program's own worker_init_fn still runs, and every batch is the unpatched loader's, random
    draws of the worker included."""
    paths = write_images(tmp_path / "images", 8)
    plan, settings = _plan(tmp_path / "cache")

    def epochs(marks: Path, context: str = "spawn") -> list[list[Any]]:
        loader = DataLoader(
            DrawingFiles(paths),
            batch_size=4,
            num_workers=1,
            multiprocessing_context=context,
            persistent_workers=persistent,
            worker_init_fn=functools.partial(_mark, marks),
            generator=torch.Generator().manual_seed(3),
        )
        return [list(loader) for _ in range(2)]

    own = epochs(tmp_path / "own", "fork")  # the same batches as spawned workers', sooner
    with PipelineMigrator(plan, guard=False, cache=settings) as migrator:
        got = epochs(tmp_path / "marks")  # its workers have ended when it returns
        stored = sum(t.entries for t in migrator.cache.store.info())
        folder = migrator._workers.counted.path
    counted = migrator.get_stats()["cache"]  # what the workers' counts files said
    assert (counted["hits"], counted["misses"], counted["stored"]) == (8, {"new": 8}, 8)
    assert not folder.exists()  # removed at restore, its sums kept
    for want, have in zip(own, got, strict=True):
        for want_batch, have_batch in zip(want, have, strict=True):
            for want_part, have_part in zip(want_batch[:3], have_batch[:3], strict=True):
                assert torch.equal(want_part, have_part)
    assert [int(h) for epoch in own for batch in epoch for h in batch[3]] == [-1] * 16
    hits = [[int(h) for batch in epoch for h in batch[3]] for epoch in got]
    assert hits[0] == [0] * 8  # the first epoch computes every value (its worker applied the plan)
    assert hits[1] == list(range(1, 9))  # each sample of the second epoch read back
    assert stored == 8
    assert len(list((tmp_path / "marks").iterdir())) == (1 if persistent else 2)


class Flipping(torch.utils.data.Dataset):  # type: ignore[type-arg]
    """Images flipped with cv2 (a call the plan places on the CPU's torch backend)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        image = np.random.default_rng(index).integers(0, 256, (6, 8, 3), dtype=np.uint8)
        return torch.from_numpy(cv2.flip(image, 1))


@pytest.mark.slow
def test_a_spawned_workers_placed_calls_are_counted_where_it_was_started() -> None:
    def epoch(context: str) -> list[torch.Tensor]:
        return list(
            DataLoader(Flipping(), batch_size=4, num_workers=1, multiprocessing_context=context)
        )

    own = epoch("fork")
    plan = plan_for({f"{__name__}.Flipping.__getitem__#0/cv2.flip#0": "cpu"})
    with PipelineMigrator(plan, guard=False) as migrator:
        got = epoch("spawn")
    row = migrator.get_stats()["functions"]["cv2.flip"]
    assert row["in_workers"]["migrated"] == 8 and row["migrated"] == 8
    assert all(torch.equal(a, b) for a, b in zip(own, got, strict=True))


def test_a_workers_migrator_never_defers_to_a_batched_run() -> None:
    from batched_support import plan as batched_plan

    from codedag.migrate.batched.settings import BatchedSettings

    shipped = WorkerPlan(
        batched_plan(), "cpu", None, BatchedSettings(verify=0), None, True, PipelineMigrator
    )
    migrator = shipped.migrator()
    assert migrator.batched.active and not migrator.batched._switch.on


@pytest.mark.slow
def test_batched_chains_run_per_sample_in_spawned_workers_with_the_loaders_own_batches(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A worker started afresh shares no deferral switch with the process that runs the
    batches: its chain runs per sample, batched execution stops with one warning, and the
    batches (drawn at random in the worker) are the loader's own."""

    contexts = iter(["fork", "spawn"])  # the reference forks: the same batches, sooner

    def make() -> DataLoader:  # type: ignore[type-arg]
        np.random.seed(1234)
        return DataLoader(
            Augmented(images(8)),
            batch_size=4,
            num_workers=1,
            multiprocessing_context=next(contexts),
            worker_init_fn=seed_worker,
            generator=torch.Generator().manual_seed(1234),
        )

    with caplog.at_level("WARNING", logger="codedag.migrate.batched.runtime"):
        reference, batches, stats = run(make)
    assert stats["deferring"] is False
    assert "they share no switch" in caplog.text
    for (want_x, want_i), (got_x, got_i) in zip(reference, batches, strict=True):
        assert torch.equal(want_x, got_x) and torch.equal(want_i, got_i)


def test_a_workers_counts_file_is_never_written_into_a_folder_made_again(tmp_path: Path) -> None:
    from codedag.migrate.spawned_workers import _write_counts

    folder = tmp_path / "counts"
    folder.mkdir()
    _write_counts(folder / "1.json", {"hits": 2})
    assert (folder / "1.json").read_text() == '{"hits": 2}'
    victim = tmp_path / "victim"
    victim.write_text("keep")
    (folder / ".2.draft").symlink_to(victim)
    with pytest.raises(OSError):  # a link planted at the draft's name is refused
        _write_counts(folder / "2.json", {"hits": 3})
    assert victim.read_text() == "keep"
    shutil.rmtree(folder)  # the run ended: a late worker's write fails, nothing is made
    with pytest.raises(FileNotFoundError):
        _write_counts(folder / "1.json", {"hits": 5})
    assert not folder.exists()

"""LoaderWatch: an epoch a training loop leaves open is sealed and planned when the loop says so."""

from __future__ import annotations

import contextlib
from typing import Any, ClassVar

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.integrations.watch import LoaderWatch, WatchSettings, places_nothing


class Resized(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> Any:
        img = np.full((10, 8, 3), i, dtype=np.uint8)
        return torch.from_numpy(cv2.resize(img, (6, 6)).astype(np.float32))


def test_end_epoch_seals_an_open_epoch_and_plans_it() -> None:
    loader = DataLoader(Resized(), batch_size=4)
    watch = LoaderWatch(loader, WatchSettings(store_plans=False))
    try:
        iterator = watch.iterate(lambda: DataLoader.__iter__(loader))
        next(iterator)  # the loop stops after one batch of three
        assert watch.results.epochs == []
        watch.end_epoch()
        epochs = watch.results.epochs
        assert [(e.batches, e.complete, e.planned) for e in epochs] == [(1, False, False)]
        assert watch.plan is not None  # planned now, not when the next epoch starts
        assert watch.results.plan_status != "skipped", watch.results.plan_reason
        watch.end_epoch()  # nothing open: nothing changes
        assert len(watch.results.epochs) == 1
        second = list(watch.iterate(lambda: DataLoader.__iter__(loader)))
        assert len(second) == 3
        assert [e.complete for e in watch.results.epochs] == [False, True]
        # a trainer that counts the batches stops at the last one, before the iterator's end
        third = watch.iterate(lambda: DataLoader.__iter__(loader))
        for _ in range(3):
            next(third)
        watch.end_epoch()
        assert [e.complete for e in watch.results.epochs] == [False, True, True]
    finally:
        watch.close()


class Rows(Dataset):  # type: ignore[type-arg]
    """Slices of a tensor in memory: nothing to move, batch or cache."""

    def __init__(self) -> None:
        self.x = torch.arange(12 * 6, dtype=torch.float32).reshape(12, 6)

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> Any:
        return self.x[i, :4]


def _refuse(what: str) -> Any:
    def refused(*args: Any, **kwargs: Any) -> None:
        raise AssertionError(what)

    return refused


def test_samples_that_call_no_known_library_are_not_planned(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import codedag.migrate.api
    import codedag.optimize.manager

    monkeypatch.setattr(codedag.optimize.manager, "OptimizerManager", _refuse("planned"))
    monkeypatch.setattr(codedag.migrate.api, "PipelineMigrator", _refuse("applied"))
    loader = DataLoader(Rows(), batch_size=4)
    watch = LoaderWatch(loader, WatchSettings(store_plans=False))
    try:
        batches = [list(watch.iterate(lambda: DataLoader.__iter__(loader))) for _ in range(2)]
        assert all(torch.equal(a, b) for a, b in zip(*batches, strict=True))
        results = watch.results
        assert results.plan_status == "nothing to apply"
        assert "no function" in results.plan_reason and results.device == "cpu"
        assert watch.migrator is None and watch.plan is None
        assert results.trace_s > 0 and not results.kept and not results.moved
    finally:
        watch.close()


def test_a_plan_that_changes_nothing_is_not_applied(monkeypatch: pytest.MonkeyPatch) -> None:
    import codedag.migrate.api
    from codedag.integrations import autoplan

    monkeypatch.setattr(autoplan, "nothing_to_plan", lambda dag: None)  # plan it all the same
    monkeypatch.setattr(codedag.migrate.api, "PipelineMigrator", _refuse("applied"))
    loader = DataLoader(Rows(), batch_size=4)
    watch = LoaderWatch(loader, WatchSettings(store_plans=False))
    try:
        for _ in range(3):
            assert len(list(watch.iterate(lambda: DataLoader.__iter__(loader)))) == 3
        results = watch.results
        assert results.plan_status == "nothing to apply", results.plan_reason
        assert watch.migrator is None and watch.plan is not None
        assert [e.planned for e in results.epochs] == [False, False, False]
        assert results.kept and not results.moved
    finally:
        watch.close()


def _watched(loader: DataLoader, epochs: int) -> LoaderWatch:  # type: ignore[type-arg]
    """A run of ``epochs`` whole epochs of ``loader`` under a watch of its own (closed)."""
    watch = LoaderWatch(loader, WatchSettings())
    try:
        for _ in range(epochs):
            assert len(list(watch.iterate(lambda: DataLoader.__iter__(loader)))) == len(loader)
    finally:
        watch.close()
    return watch


def test_a_stored_plan_that_changes_nothing_is_read_back_without_the_plans_models(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    import codedag.plan.files
    from codedag.integrations import autoplan

    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(autoplan, "nothing_to_plan", lambda dag: None)  # plan it all the same
    loader = DataLoader(Rows(), batch_size=4)
    first = _watched(loader, epochs=2)
    assert first.results.plan_status == "nothing to apply" and first.results.plan_path
    # the next run reads what the plan kept, and checks no plan (a fifth of a second's imports)
    monkeypatch.setattr(codedag.plan.files, "check_plan", _refuse("the plan was read"))
    second = _watched(loader, epochs=1)
    results = second.results
    assert results.plan_status == "nothing to apply (stored plan)", results.plan_reason
    assert results.kept == first.results.kept and results.moved == first.results.moved == []
    assert second.migrator is None and results.trace_s == 0


def test_samples_with_nothing_to_plan_are_traced_once_across_runs(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    from codedag.integrations import autoplan

    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path))
    loader = DataLoader(Rows(), batch_size=4)
    first = _watched(loader, epochs=2)
    assert first.results.plan_status == "nothing to apply" and first.results.plan_path
    assert "call no function" in first.results.plan_reason
    # the next run of the same code reads that, and neither traces nor plans
    monkeypatch.setattr(autoplan, "plan_loader", _refuse("traced again"))
    second = _watched(loader, epochs=1)
    results = second.results
    assert results.plan_status == "nothing to apply (stored plan)", results.plan_reason
    assert results.plan_reason == first.results.plan_reason and results.trace_s == 0
    assert second.migrator is None and results.moved == results.kept == []


class PngFiles(Dataset):  # type: ignore[type-arg]
    """Image files decoded by path, resized, flipped at random: a cacheable decode."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, i: int) -> Any:
        img = cv2.imread(self.paths[i])
        img = cv2.resize(img, (16, 16))
        if np.random.rand() < 0.5:
            img = cv2.flip(img, 1)
        return torch.from_numpy(img.astype(np.float32) / 255.0), i


class CountedPngFiles(PngFiles):
    """PngFiles that lists every index it is asked for, and every index its copies are asked
    for in ``copies_asked`` (one list for every copy: a class attribute)."""

    copies_asked: ClassVar[list[int]] = []

    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)
        self.asked: list[int] = []
        type(self).copies_asked = []

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "asked": None}

    def __getitem__(self, i: int) -> Any:
        (type(self).copies_asked if self.asked is None else self.asked).append(int(i))
        return super().__getitem__(i)


def _png_files(folder: Any, count: int) -> list[str]:
    rng = np.random.default_rng(0)
    paths = []
    for i in range(count):
        path = folder / f"{i}.png"
        cv2.imwrite(str(path), rng.integers(0, 256, (160, 200, 3), dtype=np.uint8))
        paths.append(str(path))
    return paths


def _epochs(loader: DataLoader, iterate: Any, epochs: int) -> list[list[Any]]:  # type: ignore[type-arg]
    np.random.seed(5)
    loader.generator.manual_seed(7)  # type: ignore[union-attr]
    return [[b for b in iterate()] for _ in range(epochs)]


def _storing_pays(tmp_path: Any, monkeypatch: Any) -> None:
    """A prefix cache folder of the test's own, and storing judged to pay (tiny images: whatever
    this machine times, every value is stored)."""
    from prefix_support import storing_pays

    monkeypatch.setenv("CODEDAG_PREFIX_CACHE_DIR", str(tmp_path / "cache"))
    storing_pays(monkeypatch)


def _assert_same_batches(expected: list[list[Any]], got: list[list[Any]]) -> None:
    """Every ``(x, index)`` batch of every epoch equal, bit for bit."""
    for want_epoch, got_epoch in zip(expected, got, strict=True):
        for (want_x, want_i), (got_x, got_i) in zip(want_epoch, got_epoch, strict=True):
            assert torch.equal(want_i, got_i)
            assert torch.equal(want_x, got_x)


def _own_then_watched(
    paths: list[str], epochs: int, settings: WatchSettings, **options: Any
) -> tuple[list[list[Any]], list[list[Any]], Any]:
    """The batches of a shuffled loader over ``paths`` (``options``: more DataLoader
    arguments), then those of the same loader under a :class:`LoaderWatch`, and its results.
    Each loader's persistent workers end before the next one starts (their counts reported)."""

    def make(**override: Any) -> DataLoader:  # type: ignore[type-arg]
        generator = torch.Generator()
        return DataLoader(
            PngFiles(paths),
            batch_size=4,
            shuffle=True,
            generator=generator,
            **{**options, **override},
        )

    # the reference forks its workers: the batches of spawned ones, without their start-up
    plain = make(
        **{"multiprocessing_context": "fork"} if "multiprocessing_context" in options else {}
    )
    expected = _epochs(plain, lambda: iter(plain), epochs)
    plain._iterator = None  # type: ignore[attr-defined]
    loader = make()
    watch = LoaderWatch(loader, settings)
    try:
        got = _epochs(loader, lambda: watch.iterate(lambda: DataLoader.__iter__(loader)), epochs)
    finally:
        loader._iterator = None  # type: ignore[attr-defined]
        results = watch.close()
    return expected, got, results


def test_with_0_workers_the_plan_serves_the_first_epoch_from_its_second_batch(
    tmp_path: Any, monkeypatch: Any
) -> None:
    _storing_pays(tmp_path, monkeypatch)
    paths = _png_files(tmp_path, 24)
    # every value stored in the epoch that computes it: the counts below are exact
    settings = WatchSettings(store_plans=False, first_epoch="all")
    expected, got, results = _own_then_watched(paths, 2, settings)
    assert results.plan_status == "applied", results.plan_reason
    first, second = results.epochs
    assert (first.planned, first.plan_from_batch) == (True, 2)
    assert (second.planned, second.plan_from_batch) == (True, None)
    # every sample of epoch 2 is read back: those of epoch 1's batches 2-6, stored as the plan
    # served them, and those of its first batch, stored after planning
    assert (results.cache["hits"], results.cache["stored"]) == (24, 24)
    assert results.cache["misses"] == {"new": 24}  # all in epoch 1
    _assert_same_batches(expected, got)


def _one_planned_epoch(tmp_path: Any, monkeypatch: Any) -> tuple[Any, list[Any], Any]:
    """One epoch of 12 counted PNG samples (batches of 4, 0 workers) under a watch that plans at
    its second batch; the dataset, each batch's indices and the run's results."""
    _storing_pays(tmp_path, monkeypatch)
    dataset = CountedPngFiles(_png_files(tmp_path, 12))
    loader = DataLoader(dataset, batch_size=4, shuffle=True, generator=torch.Generator())
    # every value stored in the epoch that computes it: the counts below are exact
    watch = LoaderWatch(loader, WatchSettings(store_plans=False, first_epoch="all"))
    # the traced samples of the first batch draw both ways (flipped and not), so the chain ends
    # before the flip and every sample reaches its cut, whatever ran before in this process
    np.random.seed(3)
    try:
        first = [i.tolist() for _x, i in watch.iterate(lambda: DataLoader.__iter__(loader))]
    finally:
        results = watch.close()
    assert results.plan_status == "applied", results.plan_reason
    return dataset, first, results


def test_samples_the_warm_up_batch_did_not_fetch_are_traced_and_the_warm_up_batch_stored(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """With 0 workers the plan is made from 8 samples the warm-up batch did not fetch (traced
    once, their code warm) and the warm-up batch is fetched once more under the plan, both from
    a copy of the data set: the script's own computes each sample once."""
    dataset, first, results = _one_planned_epoch(tmp_path, monkeypatch)
    assert dataset.asked == [i for batch in first for i in batch]
    traced, stored = dataset.copies_asked[:8], dataset.copies_asked[8:]
    assert len(set(traced)) == 8 and not set(traced) & set(first[0])
    assert stored == first[0]
    assert results.cache["stored"] == 12


def test_only_the_first_samples_not_in_the_warm_up_batch_are_traced(
    tmp_path: Any, monkeypatch: Any
) -> None:
    from codedag.integrations import autoplan

    monkeypatch.setattr(autoplan, "TRACED_SAMPLES", 2)
    dataset, first, results = _one_planned_epoch(tmp_path, monkeypatch)
    traced, stored = dataset.copies_asked[:2], dataset.copies_asked[2:]
    assert len(set(traced)) == 2 and not set(traced) & set(first[0]) and stored == first[0]
    assert results.cache["stored"] == 12


class KeptPngFiles(PngFiles):
    """PngFiles that keeps each resized image it decoded in a dict, as many data sets do."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)
        self.kept: dict[int, Any] = {}

    def __getitem__(self, i: int) -> Any:
        if i not in self.kept:
            self.kept[i] = cv2.resize(cv2.imread(self.paths[i]), (16, 16))
        img = self.kept[i]
        if np.random.rand() < 0.5:
            img = cv2.flip(img, 1)
        return torch.from_numpy(img.astype(np.float32) / 255.0), i


@pytest.mark.parametrize("workers", [0, 2])
def test_a_data_set_that_keeps_its_decoded_images_gets_its_decode_cached(
    tmp_path: Any, monkeypatch: Any, workers: int
) -> None:
    """The warm-up batch's samples are in the data set's own dict when the plan is made with 0
    workers: a trace of them would see no decode, and the plan (stored, and used by runs with
    workers, whose dicts start empty every epoch) would cache nothing."""
    _storing_pays(tmp_path, monkeypatch)
    paths = _png_files(tmp_path, 16)

    def epochs(loader: DataLoader, iterate: Any) -> list[list[Any]]:  # type: ignore[type-arg]
        np.random.seed(5)
        loader.generator.manual_seed(7)  # type: ignore[union-attr]
        return [[(x, i) for x, i in iterate()] for _ in range(3)]

    def make() -> DataLoader:  # type: ignore[type-arg]
        return DataLoader(
            KeptPngFiles(paths),
            batch_size=4,
            shuffle=True,
            num_workers=workers,
            generator=torch.Generator(),
        )

    plain = make()
    expected = epochs(plain, lambda: iter(plain))
    loader = make()
    watch = LoaderWatch(loader, WatchSettings(store_plans=False, first_epoch="all"))
    try:
        got = epochs(loader, lambda: watch.iterate(lambda: DataLoader.__iter__(loader)))
    finally:
        results = watch.close()
    assert results.plan_status == "applied", results.plan_reason
    assert watch.plan is not None
    sources = [c.source_function for c in watch.plan.cache.cached_chains]  # type: ignore[union-attr]
    assert sources == ["cv2.imread"], sources
    if workers:  # each epoch's workers start with empty dicts: epochs 2 and 3 read back
        assert results.cache["hits"] >= 16, results.cache
    _assert_same_batches(expected, got)


def test_ctrl_c_while_planning_stops_the_loop_and_the_next_epoch_plans_again(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """A notebook's cell interrupted while codedag plans, inside the second batch's ``next()``,
    then run again: the interrupt reaches the script, nothing stays patched, and the loader's
    next epochs are planned and give the loader's own batches."""
    from codedag.integrations import autoplan

    _storing_pays(tmp_path, monkeypatch)
    paths = _png_files(tmp_path, 12)
    real, calls = autoplan.plan_loader, []

    def interrupted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        if len(calls) == 1:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(autoplan, "plan_loader", interrupted)

    def run(loader: DataLoader, iterate: Any) -> list[list[Any]]:  # type: ignore[type-arg]
        np.random.seed(5)
        loader.generator.manual_seed(7)  # type: ignore[union-attr]
        with contextlib.suppress(KeyboardInterrupt):
            for _batch in iterate():  # the plain loop stops after its first batch too
                if iterate is plain_iter:
                    raise KeyboardInterrupt
        return [list(iterate()) for _ in range(2)]

    plain = DataLoader(PngFiles(paths), batch_size=4, shuffle=True, generator=torch.Generator())

    def plain_iter() -> Any:
        return iter(plain)

    expected = run(plain, plain_iter)
    loader = DataLoader(PngFiles(paths), batch_size=4, shuffle=True, generator=torch.Generator())
    watch = LoaderWatch(loader, WatchSettings(store_plans=False, first_epoch="all"))
    try:
        got = run(loader, lambda: watch.iterate(lambda: DataLoader.__iter__(loader)))
    finally:
        results = watch.close()
    assert len(calls) == 2  # interrupted in epoch 1, planned in epoch 2
    assert results.plan_status == "applied" and results.plan_reason == ""
    assert [e.planned for e in results.epochs] == [False, True, True]
    _assert_same_batches(expected, got)


class PngStream(torch.utils.data.IterableDataset):  # type: ignore[type-arg]
    """PngFiles' decode and resize yielded by an iterable data set, with a flip drawn from the
    global NumPy generator."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __iter__(self) -> Any:
        for path in self.paths:
            img = cv2.resize(cv2.imread(path), (16, 16))
            if np.random.rand() < 0.5:
                img = cv2.flip(img, 1)
            yield torch.from_numpy(np.ascontiguousarray(img))


@pytest.mark.parametrize("workers", [0, 2])
def test_an_iterable_data_sets_files_are_cached_with_its_own_batches(
    tmp_path: Any, monkeypatch: Any, workers: int
) -> None:
    """With 0 workers the plan serves epoch 1 from its second batch; with workers, from epoch 2
    (each worker iterates every file here: what the data set yields is its own business)."""
    _storing_pays(tmp_path, monkeypatch)
    paths = _png_files(tmp_path, 12)

    def epochs(iterate: Any) -> list[list[torch.Tensor]]:
        np.random.seed(5)
        torch.manual_seed(5)  # the workers' seeds are drawn from it
        return [list(iterate()) for _ in range(3)]

    plain = DataLoader(PngStream(paths), batch_size=4, num_workers=workers)
    expected = epochs(lambda: iter(plain))
    loader = DataLoader(PngStream(paths), batch_size=4, num_workers=workers)
    watch = LoaderWatch(loader, WatchSettings(store_plans=False, first_epoch="all"))
    try:
        got = epochs(lambda: watch.iterate(lambda: DataLoader.__iter__(loader)))
    finally:
        results = watch.close()
    assert results.plan_status == "applied", results.plan_reason
    assert results.cache["hits"] >= 12  # the third epoch reads every file back at least
    for want, have in zip(expected, got, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(want, have, strict=True))


def test_the_planner_is_imported_in_the_background_and_settled_before_a_fork(
    monkeypatch: Any,
) -> None:
    """The background import starts with the first epoch where a plan is likely (with 0
    workers or more) and is waited for before the loader's next iterator is made (workers fork there)
    and before planning imports anything."""
    import threading

    from codedag.integrations import prefetch

    release, order = threading.Event(), []

    def slow_import() -> None:
        release.wait(5)
        order.append("imported")

    monkeypatch.setattr(prefetch, "_thread", None)
    started: list[threading.Thread] = []

    def start() -> None:
        thread = threading.Thread(target=slow_import, daemon=True)
        started.append(thread)
        monkeypatch.setattr(prefetch, "_thread", thread)
        thread.start()

    monkeypatch.setattr(prefetch, "start", start)
    loader = DataLoader(Rows(), batch_size=4, num_workers=1)
    watch = LoaderWatch(loader, WatchSettings(store_plans=False, plan_budget_s=0))
    assert watch.iterate(lambda: DataLoader.__iter__(loader)) is not None
    assert started == []  # no plan will be made: nothing to import
    here = DataLoader(Rows(), batch_size=4, num_workers=0)
    monkeypatch.setattr(prefetch, "likely_to_plan", lambda: False)
    watch = LoaderWatch(here, WatchSettings(store_plans=False))
    assert watch.iterate(lambda: DataLoader.__iter__(here)) is not None
    assert started == []  # 0 workers and no library imported that a plan is likely for
    monkeypatch.setattr(prefetch, "likely_to_plan", lambda: True)
    watch = LoaderWatch(here, WatchSettings(store_plans=False))
    assert watch.iterate(lambda: DataLoader.__iter__(here)) is not None
    assert len(started) == 1  # the first batch overlaps the import
    release.set()
    prefetch.settle()
    monkeypatch.setattr(prefetch, "_thread", None)
    release.clear()
    started.clear()
    order.clear()
    monkeypatch.setattr(prefetch, "likely_to_plan", lambda: False)
    watch = LoaderWatch(loader, WatchSettings(store_plans=False))
    assert list(watch.iterate(lambda: DataLoader.__iter__(loader)))
    watch.close()
    assert started == []  # workers, and no library a plan is likely for: nothing imported
    monkeypatch.setattr(prefetch, "likely_to_plan", lambda: True)
    watch = LoaderWatch(loader, WatchSettings(store_plans=False))

    def make_iterator() -> Any:
        order.append("iterator")
        return DataLoader.__iter__(loader)

    try:
        watch.iterate(make_iterator)
        assert len(started) == 1 and order == ["iterator"]
        threading.Timer(0.2, release.set).start()
        watch.iterate(make_iterator)  # the next epoch: its iterator is made once imports ended
        assert order == ["iterator", "imported", "iterator"]
    finally:
        release.set()
        watch.close()


def test_places_nothing_reads_every_section_of_the_plan() -> None:
    from codedag.plan import MigrationPlan

    kept = {"function": "cv2.flip", "migrate": False, "context_keys": ["ds.get/cv2.flip#0"]}
    assert places_nothing(MigrationPlan.from_dict({"context_device_map": {}, "calls": [kept]}))
    placed = {
        "context_device_map": {"ds.get/cv2.flip#0": "cpu"},
        "calls": [{**kept, "migrate": True}],
    }
    assert not places_nothing(MigrationPlan.from_dict(placed))
    mapped_only = {"context_device_map": {"ds.get/cv2.flip#0": "cpu"}, "calls": [kept]}
    assert not places_nothing(MigrationPlan.from_dict(mapped_only))


def test_tracing_planning_and_applying_run_with_the_collector_paused(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each full GC pass walks the training process's heap (0.1-0.3 s with torch and Lightning
    loaded): the watch's one-off work runs without them, and the collector is back after."""
    import gc

    from codedag.integrations import autoplan

    seen: list[bool] = []
    plan_loader = autoplan.plan_loader

    def planning(*args: Any, **kwargs: Any) -> Any:
        seen.append(gc.isenabled())
        return plan_loader(*args, **kwargs)

    monkeypatch.setattr(autoplan, "plan_loader", planning)
    loader = DataLoader(Resized(), batch_size=4)
    watch = LoaderWatch(loader, WatchSettings(store_plans=False))
    try:
        for _ in range(2):
            list(watch.iterate(lambda: DataLoader.__iter__(loader)))
            assert gc.isenabled()  # between the watch's steps, the script's collector runs
    finally:
        watch.close()
    assert seen == [False]
    assert watch.results.plan_status != "skipped", watch.results.plan_reason
    assert gc.isenabled()


@pytest.mark.parametrize("persistent", [True, False])
def test_running_workers_apply_the_plan_made_after_the_first_batch(
    tmp_path: Any, monkeypatch: Any, persistent: bool
) -> None:
    """Workers started before the plan (persistent ones keep the code they started with) find
    it in their mailbox after the first batch and apply it before their next fetch: the batches
    they were handed already are computed as before, the rest of epoch 1 is stored, and every
    batch equals the loader's own (the flips draw from each worker's NumPy state). Workers
    started for one epoch receive it where it saves each more than applying it costs: here
    always."""
    _storing_pays(tmp_path, monkeypatch)
    monkeypatch.setattr("codedag.migrate.spawned_workers.APPLY_S", 0.0)
    paths = _png_files(tmp_path, 48)
    settings = WatchSettings(store_plans=False, first_epoch="all")
    expected, got, results = _own_then_watched(
        paths, 3, settings, num_workers=2, persistent_workers=persistent
    )
    assert results.plan_status == "applied", results.plan_reason
    first = results.epochs[0]
    # planned after the first batch, once the planner's background import ended; batches 2-5
    # were handed out when the first came (2 workers x 2): the plan serves batch 6 on at best
    assert first.planned and first.plan_from_batch is not None
    assert 6 <= first.plan_from_batch <= 12
    assert [e.planned for e in results.epochs[1:]] == [True, True]
    assert results.cache["stored"] == 48 and results.cache["misses"] == {"new": 48}
    # epoch 1 stored every batch from plan_from_batch on, which epoch 2 read back; epoch 3 all
    served = (12 - first.plan_from_batch + 1) * 4
    assert served + 48 <= results.cache["hits"] < 48 + 48
    _assert_same_batches(expected, got)


def test_started_workers_are_told_apart_from_forked_ones() -> None:
    import multiprocessing

    def watch(**options: Any) -> LoaderWatch:
        return LoaderWatch(DataLoader(Resized(), **options), WatchSettings(store_plans=False))

    assert watch()._started_workers() is None  # 0 workers: this process fetches
    fork = multiprocessing.get_context("fork")
    assert watch(num_workers=2, multiprocessing_context=fork)._started_workers() is None
    spawn = multiprocessing.get_context("spawn")
    assert watch(num_workers=2, multiprocessing_context=spawn)._started_workers() == "spawn"
    assert watch(num_workers=2, multiprocessing_context="forkserver")._started_workers() == (
        "forkserver"
    )


@pytest.mark.slow
def test_persistent_spawned_workers_apply_the_plan_themselves_with_the_loaders_own_batches(
    tmp_path: Any, monkeypatch: Any, caplog: Any
) -> None:
    """Spawned workers import the script afresh: persistent ones receive the plan (made after
    the first batch, through their mailbox) and apply it once, nothing is warned of, and the
    batches (drawn at random in the workers) are the loader's."""
    _storing_pays(tmp_path, monkeypatch)
    paths = _png_files(tmp_path, 8)
    options = {"num_workers": 1, "multiprocessing_context": "spawn", "persistent_workers": True}
    with caplog.at_level("WARNING", logger="codedag.integrations.watch"):
        expected, got, results = _own_then_watched(
            paths, 2, WatchSettings(store_plans=False), **options
        )
    assert results.plan_status == "applied (spawn workers apply it themselves)"
    assert [e.planned for e in results.epochs] == [True, True]
    assert not [r for r in caplog.records if r.name == "codedag.integrations.watch"]
    _assert_same_batches(expected, got)


def test_workers_started_afresh_each_epoch_that_would_not_earn_the_plan_back_are_said() -> None:
    from codedag.migrate.spawned_workers import WorkerPlan

    class Applied:
        def __init__(self, saved_ns: int | None) -> None:
            self.shipped = WorkerPlan({}, "cpu", None, None, None, True, None, saved_ns)

        def worker_plan(self) -> WorkerPlan:
            return self.shipped

    loader = DataLoader(Rows(), batch_size=4, num_workers=2, multiprocessing_context="spawn")
    watch = LoaderWatch(loader, WatchSettings(store_plans=False))
    watch.migrator = Applied(1_000_000)  # 1 ms a sample, 6 samples a worker
    assert watch._afresh_status("spawn") == (
        "applied in this process only (spawn workers: the plan would save each 0.01 s of an "
        "epoch, less than applying it costs)"
    )
    assert watch._in_this_process_only
    watch = LoaderWatch(loader, WatchSettings(store_plans=False))
    watch.migrator = Applied(None)
    assert watch._afresh_status("spawn").startswith("applied (spawn workers apply it themselves")
    assert not watch._in_this_process_only


def test_running_workers_receive_the_plan_only_where_it_saves_them_more_than_applying_it() -> None:
    """Workers started for one epoch get nothing from a plan that saves each of them less than
    applying it costs (1 ms a sample, 6 samples a worker); persistent ones always get it."""
    from codedag.migrate.plan_mailbox import Mailbox
    from codedag.migrate.spawned_workers import WorkerPlan

    class Applied:
        def running_worker_plan(self) -> WorkerPlan:
            return WorkerPlan({}, "cpu", None, None, None, True, None, 1_000_000)

    for persistent, delivered in ((False, False), (True, True)):
        loader = DataLoader(Rows(), batch_size=4, num_workers=2, persistent_workers=persistent)
        watch = LoaderWatch(loader, WatchSettings(store_plans=False))
        watch.migrator = Applied()
        watch._mailbox = Mailbox()
        try:
            watch._post_to_workers()
            assert watch._mailbox.posted and watch._mailbox.delivered is delivered
        finally:
            watch._mailbox.close()


def test_a_tables_run_is_among_what_the_plan_moved() -> None:
    # a plan whose only section is a lookup-table run was reported as "applied" moving nothing
    from codedag.integrations.watch import decisions
    from codedag.plan import MigrationPlan

    run = {
        "producer": "numpy.stack",
        "callers": ["train.Clips.__getitem__"],
        "calls": ["numpy.ndarray.astype", "operator.truediv"],
        "traced_ns": 230_000,
        "samples": 4,
    }
    plan = MigrationPlan.from_dict({"context_device_map": {}, "tables": {"runs": [run]}})
    moved, kept = decisions(plan)
    assert [(d.what, d.section, d.where) for d in moved] == [
        ("numpy.stack -> numpy.ndarray.astype -> operator.truediv", "tables", "lookup table")
    ]
    assert "2 element-wise call(s)" in moved[0].reason and "0.23 ms traced" in moved[0].reason
    assert kept == []
    off = MigrationPlan.from_dict(
        {"context_device_map": {}, "tables": {"mode": "off", "runs": [run]}}
    )
    assert decisions(off) == ([], [])


class LazyOpened(PngFiles):
    """PngFiles that opens a handle at its first sample and counts its samples, as an LMDB or
    HDF5 data set does: attributes its samples change."""

    def __init__(self, paths: list[str]) -> None:
        super().__init__(paths)
        self.handle: object = None
        self.served = 0

    def __getitem__(self, i: int) -> Any:
        if self.handle is None:
            self.handle = object()
        self.served += 1
        return super().__getitem__(i)


def test_a_stored_plan_is_found_by_the_next_run_whatever_its_samples_set(
    tmp_path: Any, monkeypatch: Any
) -> None:
    _storing_pays(tmp_path, monkeypatch)
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path / "plans"))
    paths = _png_files(tmp_path, 8)
    first = _stored_run(DataLoader(LazyOpened(paths), batch_size=4))
    second = _stored_run(DataLoader(LazyOpened(paths), batch_size=4))
    assert [first.plan_status, second.plan_status] == ["applied", "applied (stored plan)"]


def _stored_run(loader: DataLoader) -> Any:  # type: ignore[type-arg]
    """Two epochs of ``loader`` under a watch that stores plans: its results."""
    watch = LoaderWatch(loader, WatchSettings(store_plans=True))
    try:
        for _ in range(2):
            list(watch.iterate(lambda: DataLoader.__iter__(loader)))
    finally:
        results = watch.close()
    return results


def test_a_stored_plan_naming_modules_not_imported_yet_applies_from_the_second_batch(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """With 0 workers, a stored plan whose functions lie in modules the script has not imported
    yet waits for the script's first batch to import them (a module whose import draws from a
    global generator then draws where the script's own run does); the first batch is the
    script's own, the rest of the epoch runs under the plan."""
    from codedag.integrations import watch as watch_module

    _storing_pays(tmp_path, monkeypatch)
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path / "plans"))
    paths = _png_files(tmp_path, 8)
    first = _stored_run(DataLoader(PngFiles(paths), batch_size=2))
    # as if cv2.resize lay in a module the script imports in its first sample
    monkeypatch.setattr(watch_module, "_unloaded", lambda p: ["cv2.resize"], raising=False)
    second = _stored_run(DataLoader(PngFiles(paths), batch_size=2))
    assert second.plan_status == "applied (stored plan)" and second.trace_s == 0
    assert [e.plan_from_batch for e in second.epochs[:1]] == [2]  # the first batch ran plainly
    assert first.epochs[0].plan_from_batch == 2  # as a first run's plan does
    # an epoch of one batch: the stored plan applies at its end, for the next epoch
    third = _stored_run(DataLoader(PngFiles(paths), batch_size=len(paths)))
    assert third.plan_status == "applied (stored plan)" and third.trace_s == 0
    assert third.epochs[0].plan_from_batch == 2 and third.epochs[1].planned  # and kept


def test_the_functions_of_modules_not_imported_are_those_a_plan_would_import(
    monkeypatch: Any,
) -> None:
    import sys

    from codedag.integrations.watch import _unloaded
    from codedag.plan import MigrationPlan

    plan = MigrationPlan.from_dict(
        {
            "context_device_map": {"ds.get/cv2.flip#0": "cpu"},
            "calls": [
                {"function": "cv2.flip", "migrate": True, "context_keys": ["ds.get/cv2.flip#0"]},
                {"function": "cv2.blur", "migrate": False, "context_keys": ["ds.get/cv2.blur#0"]},
            ],
        }
    )
    assert _unloaded(plan) == []
    monkeypatch.delitem(sys.modules, "cv2")
    assert _unloaded(plan) == ["cv2.flip"]  # what the plan keeps as it is, it never imports


def test_a_prefix_chain_a_run_gave_up_is_not_cached_by_the_next(
    tmp_path: Any, monkeypatch: Any
) -> None:
    """A chain found not to pay is flagged in the store, and its stored plan kept caching it:
    every later run patched and keyed its calls for nothing (a tiny decode's script ran its
    epochs 2-3 a fifth slower than without codedag, and its first epoch 0.3 s slower)."""
    from prefix_support import storing_pays

    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CODEDAG_PREFIX_CACHE_DIR", str(tmp_path / "cache"))
    storing_pays(monkeypatch, pays=False)  # given up
    paths = _png_files(tmp_path, 8)
    loader = DataLoader(PngFiles(paths), batch_size=4)
    first = _watched(loader, epochs=2)
    assert first.results.plan_status == "applied", first.results.plan_reason
    given_up = [k for k in first.results.kept if k.section == "cache"]
    assert [k.reason.split(":")[0] for k in given_up] == ["given up at run time"]
    assert not any(m.section == "cache" for m in first.results.moved)
    second = _watched(loader, epochs=1)
    assert "(stored plan)" in second.results.plan_status, second.results.plan_reason
    assert second.results.kept == first.results.kept
    assert second.plan is None or not second.plan.cache.cached_chains  # type: ignore[union-attr]
    assert not second.results.cache.get("enabled")


def test_an_epoch_the_script_left_early_ends_at_its_last_batch_and_step() -> None:
    """A loop that stops after a number of steps left the epoch open until the next epoch or the
    script's end: its time took in the pause between epochs (validation, saving) and the end of
    the script, and its samples/s fell accordingly."""
    import time

    loader = DataLoader(Rows(), batch_size=2)
    watch = LoaderWatch(loader, WatchSettings(store_plans=False, plan_budget_s=0))
    try:
        for _ in range(2):
            for step, _batch in enumerate(watch.iterate(lambda: DataLoader.__iter__(loader))):
                time.sleep(0.02)  # a training step
                if step == 2:
                    break
            time.sleep(0.5)  # validation, or the rest of the script
    finally:
        results = watch.close()
    assert [e.batches for e in results.epochs] == [3, 3]
    assert not any(e.complete for e in results.epochs)
    for epoch in results.epochs:  # three steps of 20 ms, none of the pauses
        assert 0.06 <= epoch.epoch_s < 0.3, epoch

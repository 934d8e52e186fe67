"""``codedag.accelerate(loader)``: the same loader object, the same batches, a plan from epoch 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import codedag
from codedag.errors import ConfigError
from codedag.integrations.accelerate import release, results_of
from codedag.integrations.watch import batch_samples, listed_batch_size


class FlipFiles(Dataset):  # type: ignore[type-arg]
    """Decode a PNG with cv2, resize, flip at random (NumPy's global generator)."""

    def __init__(self, files: list[str]) -> None:
        self.files = files

    def __len__(self) -> int:
        return len(self.files)

    def __getitem__(self, i: int) -> Any:
        img = cv2.imread(self.files[i])
        img = cv2.resize(img, (12, 12))
        if np.random.rand() < 0.5:
            img = cv2.flip(img, 1)
        return torch.from_numpy(img.astype(np.float32))


class OwnLoader(DataLoader):  # type: ignore[type-arg]
    """A user's DataLoader subclass."""


def _files(folder: Path, n: int = 12) -> list[str]:
    """PNGs of noise that take about 0.15 ms to decode: the prefix cache's cut after the resize
    (432 bytes) saves several times what storing it costs, so the plan caches it however busy
    the machine is (a 16x14 PNG decodes in as long as storing it takes: a coin toss under load)."""
    rng = np.random.default_rng(1)
    paths = []
    for i in range(n):
        path = folder / f"{i:02d}.png"
        cv2.imwrite(str(path), rng.integers(0, 255, (192, 168, 3), dtype=np.uint8))
        paths.append(str(path))
    return paths


def _epochs(loader: Any, epochs: int = 3) -> list[list[torch.Tensor]]:
    np.random.seed(7)
    torch.manual_seed(7)
    return [list(loader) for _ in range(epochs)]


def test_same_batches_and_a_plan_from_the_first_epochs_second_batch(tmp_path: Path) -> None:
    files = _files(tmp_path)
    expected = _epochs(OwnLoader(FlipFiles(files), batch_size=4, shuffle=True))
    loader = OwnLoader(FlipFiles(files), batch_size=4, shuffle=True)
    same = codedag.accelerate(loader, store_plans=False)
    assert same is loader
    assert isinstance(loader, OwnLoader) and isinstance(loader, DataLoader)
    try:
        got = _epochs(loader)
        results = results_of(loader)
    finally:
        final = release(loader)
    assert type(loader) is OwnLoader  # the class is the user's again
    for want, have in zip(expected, got):
        assert len(want) == len(have)
        for a, b in zip(want, have):
            assert torch.equal(a, b)
    assert results is not None and final is not None
    assert final.plan_status == "applied", final.plan_reason
    assert [(e.planned, e.plan_from_batch) for e in final.epochs] == [
        (True, 2),
        (True, None),
        (True, None),
    ]
    assert [e.samples for e in final.epochs] == [12, 12, 12]
    assert release(loader) is None  # a second release does nothing


def test_a_second_loader_runs_under_the_plan_applied_first(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from prefix_support import storing_pays

    import codedag.calibrate.store_costs as store_costs

    # storing planned and judged to pay whatever this machine times meanwhile (a busy machine
    # once measured the store dearer than these tiny images' decode, and planned no cut): the
    # hits below are exact
    storing_pays(monkeypatch)
    # a store of its own: the session's shared one may hold an earlier test's flag that this
    # chain (the same data set class and calls) did not pay on a busy machine
    monkeypatch.setenv("CODEDAG_PREFIX_CACHE_DIR", str(tmp_path / "prefix"))
    monkeypatch.setattr(
        store_costs,
        "measure_store",
        lambda sizes, repeats=7: store_costs.StoreCosts(
            sorted(set(sizes)), [1] * len(set(sizes)), [1] * len(set(sizes)), "test"
        ),
    )
    files = _files(tmp_path)
    train_files, val_files = files[:8], files[8:]

    def both(train: Any, val: Any) -> list[list[torch.Tensor]]:
        np.random.seed(7)
        out = []
        for _ in range(3):  # validation after each epoch, as training scripts do
            out.append(list(train))
            out.append(list(val))
        return out

    expected = both(
        DataLoader(FlipFiles(train_files), batch_size=4), DataLoader(FlipFiles(val_files))
    )
    train = codedag.accelerate(DataLoader(FlipFiles(train_files), batch_size=4), store_plans=False)
    val = codedag.accelerate(DataLoader(FlipFiles(val_files)), store_plans=False)
    try:
        with caplog.at_level("WARNING", logger="codedag.integrations.watch"):
            got = both(train, val)
    finally:
        val_results, train_results = release(val), release(train)
    for want, have in zip(expected, got, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(want, have, strict=True))
    assert train_results is not None and train_results.plan_status == "applied"
    assert val_results is not None and val_results.plan_status == "not planned"
    assert val_results.plan_reason.startswith(
        "it runs under the plan applied for the DataLoader over FlipFiles, planned first"
    )
    assert val_results.trace_s == 0.0  # nothing traced for it
    warned = [r for r in caplog.records if "is not planned" in r.getMessage()]
    assert len(warned) == 1
    # the second loader's samples go through the plan's prefix cache: the last two epochs read
    # every one of them back
    assert train_results.cache["hits"] >= 2 * len(files), train_results.cache
    assert any((tmp_path / "prefix").iterdir())  # read back from the test's own store


class ResizedOnly(FlipFiles):
    """FlipFiles edited: no flip, a smaller size (a notebook's cell changed and run again)."""

    def __getitem__(self, i: int) -> Any:
        return torch.from_numpy(cv2.resize(cv2.imread(self.files[i]), (8, 8)).astype(np.float32))


def test_a_loader_dropped_with_its_plan_leaves_no_patch_and_the_next_one_is_planned(
    tmp_path: Path,
) -> None:
    """A notebook's cell run again binds a new accelerated loader; the old one is unreachable,
    its watch with it (a cycle the collector frees when it runs), but its plan's patches are
    held by the functions they replaced: the next loader's plan restores them and applies."""
    import gc
    import weakref

    import cv2 as cv2_module

    files = _files(tmp_path)
    original = cv2_module.imread
    loader = codedag.accelerate(DataLoader(FlipFiles(files), batch_size=4), store_plans=False)
    _epochs(loader, 2)
    watch = weakref.ref(loader.__dict__["_codedag_watch"])
    assert cv2_module.imread is not original  # the plan's cache patches it
    gc.disable()  # the cycle stays until the next plan asks
    try:
        del loader
        expected = _epochs(DataLoader(ResizedOnly(files), batch_size=4), 3)
        edited = codedag.accelerate(DataLoader(ResizedOnly(files), batch_size=4), store_plans=False)
        try:
            got = _epochs(edited, 3)
            results = results_of(edited)
        finally:
            release(edited)
    finally:
        gc.enable()
    assert watch() is None
    assert results is not None and results.plan_status == "applied", results.plan_reason
    assert cv2_module.imread is original
    for want, have in zip(expected, got, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(want, have, strict=True))


def test_accelerate_refuses_what_is_not_a_dataloader() -> None:
    with pytest.raises(ConfigError, match="expects a torch DataLoader"):
        codedag.accelerate([1, 2, 3])


def test_batch_samples_reads_the_first_dimension() -> None:
    assert batch_samples((torch.zeros(5, 3), torch.zeros(5))) == 5
    assert batch_samples({"x": np.zeros((2, 4))}) == 2
    assert batch_samples([1, 2, 3]) == 3


def test_a_loader_whose_collate_lists_its_samples_counts_them() -> None:
    """Detection loaders hand on ``(list(images), list(targets))``: each image, of its own size,
    is a sample, not a batch of 3 (its channels)."""
    from torch.utils.data import DataLoader

    def listed(batch: list[Any]) -> tuple[list[Any], list[Any]]:
        images, targets = zip(*batch, strict=True)
        return list(images), list(targets)

    images = [torch.zeros(3, 10 + i, 12) for i in range(6)]
    data = [(image, {"boxes": torch.zeros(1, 4)}) for image in images]
    loader = DataLoader(data, batch_size=4, collate_fn=listed)
    size = listed_batch_size(loader)
    assert size == 4 and listed_batch_size(DataLoader(data, batch_size=4)) is None
    assert [batch_samples(b, size) for b in loader] == [4, 2]
    same = [torch.zeros(3, 8, 8)] * 4  # one size for all
    assert batch_samples((same[:2], [{}] * 2), size) == 2
    assert batch_samples((same[:2], [{}] * 2)) == 3  # without the loader's collate: a batch of 3
    assert batch_samples(same, size) == 4  # the images alone: as many as the batch size
    stacked = [torch.zeros(4, 3, 8, 8), torch.zeros(4, 1, 8, 8)]  # a collate that stacks
    assert batch_samples(stacked, size) == 4


def test_codedag_run_counts_no_loader_a_lightning_evaluation_loop_iterates(tmp_path: Path) -> None:
    """Lightning's ``fit`` iterates the validation loader first, for its sanity check: ``codedag
    run`` plans the training loader iterated after it."""
    from codedag.integrations.accelerate import ScriptWatch, not_for_evaluation
    from codedag.integrations.watch import WatchSettings

    files = _files(tmp_path, n=4)
    train, val = DataLoader(FlipFiles(files), batch_size=2), DataLoader(FlipFiles(files[:2]))
    evaluation: dict[str, Any] = {"__name__": "lightning.pytorch.loops.evaluation_loop"}
    exec("def run(loader):\n    return [batch for batch in loader]", evaluation)
    settings = WatchSettings(plan_budget_s=0)  # counted and timed, never planned
    with ScriptWatch(settings, 0, select=not_for_evaluation) as watch:
        evaluation["run"](val)  # the sanity check
        list(train)
        evaluation["run"](val)  # validation after the epoch
        assert watch.watch is not None and watch.watch.loader is train
    assert watch.seen == 1
    assert not_for_evaluation(train)  # called from here: no evaluation loop


def test_a_loader_made_again_each_epoch_is_the_planned_loaders_next_epoch(tmp_path: Path) -> None:
    """A helper that builds the DataLoader each epoch: the loaders over the same data set and
    settings are one loader, its epochs counted and served by one plan; another loader over
    the same data set with other settings, or over another data set, is a loader of its own."""
    from codedag.integrations.accelerate import ScriptWatch
    from codedag.integrations.run_summary import summary_lines
    from codedag.integrations.watch import WatchSettings

    files = _files(tmp_path, n=8)
    dataset = FlipFiles(files)

    def make(batch_size: int = 4) -> DataLoader:  # type: ignore[type-arg]
        return DataLoader(dataset, batch_size=batch_size)

    plain = _epochs(make())
    np.random.seed(7)
    torch.manual_seed(7)
    with ScriptWatch(WatchSettings(store_plans=False), 0) as watch:
        made = [list(make()) for _ in range(3)]
        list(make(batch_size=2))  # other settings: a loader of its own
        list(DataLoader(FlipFiles(files[:4]), batch_size=4))  # another data set's
    results = watch.close()
    for mine, theirs in zip(made, plain, strict=True):
        assert all(torch.equal(a, b) for a, b in zip(mine, theirs, strict=True))
    assert [e.batches for e in results.epochs] == [2, 2, 2]
    assert results.epochs[2].planned, results.plan_reason
    assert results.loaders_made == 3 and results.loaders_seen == 3
    assert "over FlipFiles (made 3 times alike)" in summary_lines(results)[0]

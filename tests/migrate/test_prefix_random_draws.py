"""A cut lies after a draw of Python's ``random`` only where every traced sample gives the calls
after it the same arguments. imread, resize, then a warp whose matrix comes from
``random.uniform`` outside any traced call: the plan caches up to the resize, says why it stops
there, and two epochs with it equal the plain loader bit for bit, the second read back; the YOLO
example's plan stops before its random perspective warp; transforms applied with ``p=1`` are
cached, and a path the trace never saw misses without a different batch."""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from prefix_support import FileDataset, write_images
from random_pipelines import SIZE, WarpedImages
from torch.utils.data import DataLoader, Dataset

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.cache.runtime import CacheSettings
from codedag.optimize.cache import decide, find_prefixes
from codedag.store.tiers import StoreSettings

STOP = (
    "cut ends before cv2.warpAffine: it follows a random draw (random.uniform; its arguments "
    "differ between samples)"
)


def _epochs(dataset: Dataset, count: int = 2, workers: int = 0) -> list[list[torch.Tensor]]:
    loader = DataLoader(dataset, batch_size=4, shuffle=False, num_workers=workers)
    out = []
    for epoch in range(count):
        random.seed(epoch)
        out.append([batch.clone() for batch, _ in loader])
    return out


def _plan(dataset: Dataset) -> dict[str, Any]:
    """The plan of ``dataset``'s chain, weighed against a store that costs a few microseconds a
    value: what these tests check is where a chain may be cut after draws and how its values
    behave, not whether storing its small images pays on a busy machine (measured, it did not
    always: the plan then kept no cut)."""
    from unittest import mock

    from codedag.calibrate import store_costs
    from codedag.optimize.manager import OptimizerManager
    from codedag.trace import trace_dataloader

    cheap = store_costs.StoreCosts([1, 1 << 24], [2_000, 200_000], [4_000, 400_000], "fixed")
    random.seed(0)
    tracer, _ = trace_dataloader(DataLoader(dataset, batch_size=4, shuffle=False))
    with mock.patch.object(store_costs, "measure_store", lambda sizes, repeats=7: cheap):
        plan = OptimizerManager(k=1, target_device="cpu", cache="auto").optimize(tracer.dag)
    plan = plan["migration_plan"]
    plan["context_device_map"] = {}
    plan["calls"] = [{**c, "migrate": False, "device": "cpu"} for c in plan["calls"]]
    return plan


def _same_under_plan(
    dataset: Dataset, plan: dict[str, Any], cache: CacheSettings, count: int, workers: int = 0
) -> Any:
    """``count`` epochs of ``dataset`` with ``plan`` applied, each batch equal to the plain
    loader's bit for bit; the cache's statistics."""
    plain = _epochs(dataset, count, workers)
    with PipelineMigrator(plan, guard=False, cache=cache) as migrator:
        cached = _epochs(dataset, count, workers)
        stats = migrator.get_stats()["cache"]
    for epoch, (mine, theirs) in enumerate(zip(cached, plain, strict=True)):
        for batch, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            assert torch.equal(a, b), f"epoch {epoch + 1}, batch {batch} differs"
    return stats


def test_the_cut_ends_at_the_resize_and_two_epochs_read_it_back(tmp_path: Path) -> None:
    paths = write_images(tmp_path / "images", n=8)
    plan = _plan(WarpedImages(paths))
    (chain,) = plan["cache"]["chains"]
    assert chain["steps"] == ["cv2.imread", "cv2.resize"]
    assert chain["cached"] and chain["cut"]["step"] == "cv2.resize", chain["reason"]
    assert chain["stop"] == STOP and chain["reason"].endswith(f"; {STOP}")
    settings = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20)
    cache = CacheSettings(store=settings, judge_after=0)
    stats = _same_under_plan(WarpedImages(paths), plan, cache, 2)
    assert stats["misses"] == {"new": len(paths)}, stats["diverged"]
    assert stats["hits"] == len(paths)  # the second epoch read every prefix back


def test_the_yolo_examples_cut_stops_before_its_random_perspective(tmp_path: Path) -> None:
    from codedag.experiments.pipelines import yolo_files
    from codedag.trace import trace_dataloader

    loader = yolo_files.make_loader(batch_size=4, n=4, shuffle=False, root=str(tmp_path),
                                    img_size=64, min_size=60, max_size=96)  # fmt: skip
    random.seed(0)
    np.random.seed(0)
    tracer, _ = trace_dataloader(loader)
    found = find_prefixes(tracer.dag)
    (chain,) = found.chains
    assert [name for name, _ in chain.common] == ["cv2.imread", "cv2.resize", "cv2.copyMakeBorder"]
    # its matrix is computed in the sample from the draws (matrix[:2] in the warp's arguments)
    assert chain.stop == "cv2.warpAffine also takes a value computed in the sample"
    section = decide(found, lambda nbytes: (nbytes, nbytes), 1 << 30)
    (entry,) = section.chains
    assert entry.steps == ["cv2.imread", "cv2.resize", "cv2.copyMakeBorder"]
    assert entry.stop == chain.stop and entry.reason.endswith(f"; {chain.stop}")


class AlwaysApplied(FileDataset):
    """Transforms applied when ``random.random() < p``, as albumentations applies them, with
    ``p=1`` for the resize and the padding (``p`` lowered after planning: the resize is then
    skipped where the draw says so, a path the trace never saw), then a random warp."""

    p = 1.0

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        if random.random() < self.p:
            image = cv2.resize(image, (SIZE - 4, SIZE - 4), interpolation=cv2.INTER_AREA)
        if random.random() < 1.0:
            image = cv2.copyMakeBorder(image, 2, 2, 2, 2, cv2.BORDER_CONSTANT, value=0)
        matrix = np.float32([[1, 0, random.uniform(-4, 4)], [0, 1, random.uniform(-4, 4)]])
        image = cv2.warpAffine(image, matrix, (SIZE, SIZE))
        return torch.from_numpy(image), index


def test_calls_after_draws_that_give_them_the_same_arguments_are_cached(tmp_path: Path) -> None:
    paths = write_images(tmp_path / "images", n=8)
    plan = _plan(AlwaysApplied(paths))
    (chain,) = plan["cache"]["chains"]
    assert chain["steps"] == ["cv2.imread", "cv2.resize", "cv2.copyMakeBorder"]
    assert chain["cached"] and chain["cut"]["step"] == "cv2.copyMakeBorder", chain["reason"]
    assert "cv2.warpAffine: it follows a random draw" in chain["stop"]
    settings = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20)
    cache = CacheSettings(store=settings, judge_after=0)
    for p in (1.0, 0.5):  # then a path the trace never saw: those samples miss, none differs
        AlwaysApplied.p = p
        try:
            stats = _same_under_plan(AlwaysApplied(paths), plan, cache, 3)
        finally:
            AlwaysApplied.p = 1.0
        if p == 1.0:
            assert stats["hits"] == 2 * len(paths), stats


def _off_the_traced_path(
    kind: Any, tmp_path: Path, p: float, workers: int = 0
) -> tuple[dict[str, Any], Any]:
    """``kind``'s chain, planned with the draw probability the class holds, and the cache's
    statistics of two epochs run with it set to ``p`` (every batch as without the cache)."""
    paths = write_images(tmp_path / "images", n=8)
    plan = _plan(kind(paths))
    (chain,) = plan["cache"]["chains"]
    settings = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20)
    planned, kind.p = kind.p, p
    try:
        stats = _same_under_plan(kind(paths), plan, CacheSettings(store=settings), 2, workers)
    finally:
        kind.p = planned
    return chain, stats


class FlippedInTrace(FileDataset):
    """A flip drawn with probability ``p``, taken by every traced sample (``p`` 1 while
    planning), then a method of the array: with ``p`` lowered, a sample that does not flip
    calls ``.astype`` on a value of the chain where its trace called ``cv2.flip``."""

    p = 1.0

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.resize(cv2.imread(self.paths[index], cv2.IMREAD_COLOR), (SIZE, SIZE))
        if random.random() < self.p:
            image = cv2.flip(image, 1)
        return torch.from_numpy(image.astype(np.float32) / 255.0), index


def _every_sample_reaches_a_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    """A cut after a draw is weighed by the share of samples expected to reach it, which keeps
    cheap calls after a draw out of the cut (test_prefix_find); here every sample is taken to
    reach it, so that the cut lies after the draw, as it does where the calls after a draw cost
    the most, and a sample off the traced path meets the chain's values before the cut."""
    from codedag.optimize import cache

    monkeypatch.setattr(cache, "path_share", lambda candidate, samples: 1.0)


class FlippedThenTensor(FlippedInTrace):
    """FlippedInTrace handing the image to ``torch.from_numpy`` as it is: with ``p`` lowered, a
    sample that does not flip hands it a value of the chain, and torch takes NumPy arrays only
    there (its other functions take anything with ``__torch_function__``)."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.resize(cv2.imread(self.paths[index], cv2.IMREAD_COLOR), (SIZE, SIZE))
        if random.random() < self.p:
            image = cv2.flip(image, 1)
        return torch.from_numpy(image), index


@pytest.mark.parametrize(
    ("kind", "reason"),
    [
        (FlippedInTrace, "a path the chain's trace did not take"),  # its .astype
        (FlippedThenTensor, "torch.from_numpy"),  # guarded: torch takes NumPy arrays only there
    ],
)
def test_a_sample_off_the_traced_path_computes_the_chain_where_it_leaves_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: type, reason: str
) -> None:
    _every_sample_reaches_a_cut(monkeypatch)
    chain, stats = _off_the_traced_path(kind, tmp_path, 0.5)
    assert chain["cached"] and chain["cut"]["step"] == "cv2.flip", chain["reason"]
    # the samples that did not flip were computed where they left the chain: none failed and
    # ran again on a stand-in, and the reason is counted
    assert "error" not in stats["misses"], stats
    assert stats["misses"]["diverged"] > 0
    assert any(reason in k for k in stats["diverged"]), stats["diverged"]


def test_why_workers_computed_samples_without_the_cache_reaches_the_loaders_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # no sample flips (p 0): each leaves the chain in a worker, which says why
    _every_sample_reaches_a_cut(monkeypatch)
    _chain, stats = _off_the_traced_path(FlippedInTrace, tmp_path, 0.0, workers=2)
    assert stats["misses"] == {"diverged": 16}, stats
    (reason,) = stats["diverged"]
    assert "a path the chain's trace did not take" in reason
    assert stats["diverged"][reason] == 16


class RarelyBlurred(FileDataset):
    """A blur drawn with probability ``p`` between the resize and the colour conversion, in no
    traced sample (``p`` 0 while planning): with ``p`` raised, a sample hands a value before
    the cut to ``cv2.GaussianBlur``, a function the plan never saw."""

    p = 0.0

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.resize(cv2.imread(self.paths[index], cv2.IMREAD_COLOR), (SIZE, SIZE))
        if random.random() < self.p:
            image = cv2.GaussianBlur(image, (3, 3), 0)
        return torch.from_numpy(cv2.cvtColor(image, cv2.COLOR_BGR2RGB)), index


def test_a_library_call_the_trace_never_saw_takes_the_computed_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _every_sample_reaches_a_cut(monkeypatch)
    chain, stats = _off_the_traced_path(RarelyBlurred, tmp_path, 0.5)
    assert chain["cut"]["step"] == "cv2.cvtColor" and "cv2.GaussianBlur" not in chain["guards"]
    # the blurred samples were computed where the blur took their value: no batch failed and
    # ran again (an iterable data set's could not have)
    assert "error" not in stats["misses"], stats
    assert stats["hits"] > 0

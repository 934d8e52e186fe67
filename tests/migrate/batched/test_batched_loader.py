"""Batched execution through a real DataLoader: the training loop gets what the unpatched run
gets, with 0, 2 and 4 forked workers, a partial last batch, and CUDA never touched in a worker."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from batched_support import (
    CHAIN,
    FORK,
    Augmented,
    images,
    loader,
    max_level_diff,
    plan,
    run,
    seed_worker,
)

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.batched.settings import BatchedSettings

STEPS = 12  # resize, cvtColor, flip, warpAffine, astype, /, -, /, transpose, ascontiguousarray, ...


@pytest.mark.timeout(240)
@pytest.mark.filterwarnings("ignore:This DataLoader will create 4 worker processes")
@pytest.mark.parametrize("workers", [0, 2, 4])
def test_batches_equal_the_unpatched_run(workers: int) -> None:
    data = images(10)
    make = functools.partial(loader, Augmented(data), workers, 4)
    reference, batches, stats = run(make)
    assert [b[0].shape[0] for b in batches] == [4, 4, 2]  # the partial last batch too
    for (ref_x, ref_y), (x, y) in zip(reference, batches, strict=True):
        assert type(x) is torch.Tensor and x.dtype == torch.float32 and x.is_contiguous()
        assert x.shape == ref_x.shape
        assert torch.equal(y, ref_y)  # labels untouched
        assert max_level_diff(x, ref_x) <= 1.001  # resize/warp: within 1 level (tolerance)
    assert stats["batches"] == 3 and stats["samples"] == 10
    assert stats["forced"] == {}
    assert stats["backend_calls"] <= STEPS * stats["groups"]
    assert stats["d2h_bytes"] == 0  # the CPU device: nothing moves


def test_batch_invariance_batched_equals_per_sample_backend_results() -> None:
    """The same samples batched by 5 and one by one through the batched backends: bit-equal."""
    data = images(10)
    _ref, by_five, _stats = run(functools.partial(loader, Augmented(data), 0, 5))
    _ref, by_one, _stats = run(functools.partial(loader, Augmented(data), 0, 1))
    stacked = torch.cat([x for x, _y in by_five])
    singles = torch.cat([x for x, _y in by_one])
    assert torch.equal(stacked, singles)


TOUCHED = FORK.Value("i", 0)


def _count_cuda(*_args: object, **_kwargs: object) -> object:
    with TOUCHED.get_lock():
        TOUCHED.value += 1
    raise RuntimeError("CUDA used in a DataLoader worker")


def _forbid_cuda(worker_id: int) -> None:
    seed_worker(worker_id)
    for name in ("is_available", "_lazy_init", "current_stream", "Stream", "Event", "init"):
        setattr(torch.cuda, name, _count_cuda)


class _Checked(Augmented):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        sample = super().__getitem__(index)
        assert not torch.cuda.is_initialized(), "CUDA initialized in a worker"
        return sample


@pytest.mark.timeout(120)
def test_a_worker_never_initializes_cuda() -> None:
    """Plans that target CUDA still record and collate on the CPU in workers; the check runs
    inside the worker (any CUDA entry point there counts and raises)."""
    TOUCHED.value = 0
    the_plan = plan(device="cuda:0")  # mapped to the default device where none exists
    migrator = PipelineMigrator.from_plan(the_plan, guard=False, batched=BatchedSettings(verify=0))
    dataset = _Checked(images(8))
    with migrator:
        got = list(
            torch.utils.data.DataLoader(
                dataset,
                batch_size=4,
                num_workers=2,
                multiprocessing_context=FORK,
                worker_init_fn=_forbid_cuda,
            )
        )
    assert len(got) == 2 and TOUCHED.value == 0
    assert migrator.get_stats()["batched"]["samples"] == 8


def test_without_a_plan_section_nothing_is_patched_for_batches() -> None:
    migrator = PipelineMigrator.from_plan({"context_device_map": {}}, guard=False)
    with migrator:
        assert migrator.patched_functions() == []
    assert migrator.get_stats()["batched"] == {"enabled": False}


def test_deferred_calls_are_not_also_placed_per_call() -> None:
    the_plan = plan()
    the_plan["context_device_map"] = {"app.f#0/cv2.resize#0": "cpu", "app.f#0/cv2.blur#0": "cpu"}
    migrator = PipelineMigrator.from_plan(the_plan, guard=False)
    with migrator:
        per_call = set(migrator.get_stats()["functions"])  # placed calls' wrappers
        listed = set(migrator.patched_functions())  # every replaced function
    assert "cv2.blur" in per_call and "cv2.resize" not in per_call
    assert {"cv2.blur", "cv2.resize"} <= listed
    assert set(CHAIN) <= set(migrator.batched.chains.functions)


def test_outside_a_dataloader_the_chain_runs_eagerly() -> None:
    data = images(2)
    np.random.seed(3)
    expected = Augmented(data)[1][0]
    np.random.seed(3)
    with PipelineMigrator.from_plan(plan(), guard=False):
        got = Augmented(data)[1][0]
    assert type(got) is torch.Tensor and torch.equal(got, expected)

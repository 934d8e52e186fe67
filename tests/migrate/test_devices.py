"""Devices: defaults, torchrun ranks, and DataLoader workers (they run migrated calls on the CPU,
never initialize CUDA, never hang)."""

from __future__ import annotations

import multiprocessing
import sys
from collections.abc import Iterator

import cv2
import numpy as np
import pytest
import torch
from migrate_support import CALLS, make_registry, plan_for
from torch.utils.data import DataLoader, Dataset

from codedag.migrate import devices
from codedag.migrate.api import PipelineMigrator

GET = f"{__name__}.FlipDataset.__getitem__"
NEXT = "torch.utils.data.dataloader._BaseDataLoaderIter.__next__"


class FlipDataset(Dataset):
    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.images = [rng.integers(0, 256, (16, 20, 3), dtype=np.uint8) for _ in range(8)]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int, bool, bool]:
        img = cv2.flip(self.images[index], 1)
        x = np.clip(img.astype(np.float32) / 255.0, 0.1, 0.9)
        # what the worker saw: backend calls made in this process, whether it avoids CUDA
        return (
            torch.from_numpy(x),
            CALLS["flip"],
            devices.must_avoid_cuda(),
            torch.cuda.is_initialized(),
        )


@pytest.mark.timeout(120)
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("workers", [0, 2, 4])
def test_dataloader_with_workers_equals_the_original(workers: int) -> None:
    dataset = FlipDataset()
    reference = torch.stack(
        [
            torch.from_numpy(np.clip(im[:, ::-1] / np.float32(255), 0.1, 0.9))
            for im in dataset.images
        ]
    )
    # Keys as a trace of the main process writes them; the CPU-kept collate call makes the
    # placement context-dependent, so workers (no __next__ above __getitem__) match by suffix.
    plan = plan_for(
        {f"{NEXT}#0/{GET}#{i}/cv2.flip#0": "cpu" for i in range(4)}
        | {f"{NEXT}#0/{GET}#{i}/numpy.clip#0": "cpu" for i in range(4)},
        calls=[
            {
                "function": "cv2.flip",
                "context_keys": [f"{NEXT}#0/app.collate#0/cv2.flip#0"],
                "migrate": False,
            }
        ],
    )
    context = multiprocessing.get_context("fork") if workers else None
    loader = DataLoader(dataset, batch_size=4, num_workers=workers, multiprocessing_context=context)
    with PipelineMigrator.from_plan(plan, registry=make_registry()) as migrator:
        batches = list(loader)
    images = torch.cat([b[0] for b in batches])
    torch.testing.assert_close(images, reference.to(images.dtype))
    backend_calls = torch.cat([b[1] for b in batches])
    assert bool((backend_calls > 0).all())  # the backend ran where __getitem__ ran
    avoid = torch.cat([b[2] for b in batches])
    assert bool(avoid.all()) == (workers > 0)
    assert not bool(torch.cat([b[3] for b in batches]).any())  # CUDA never initialized
    flips = migrator.get_stats()["functions"]["cv2.flip"]
    assert flips["migrated"] == len(dataset)  # counted in the workers, summed here
    assert flips["in_workers"]["migrated"] == (len(dataset) if workers else 0)
    if workers == 0:
        assert flips["match_levels"] == {"exact": 8}


@pytest.fixture
def fresh_process() -> Iterator[None]:
    """Forget this process's device decisions before and after (as a forked child does)."""
    devices._reset_after_fork()
    yield
    devices._reset_after_fork()


def test_simulated_worker_runs_cuda_plans_on_the_cpu(
    monkeypatch: pytest.MonkeyPatch, fresh_process: None
) -> None:
    monkeypatch.setattr(torch.utils.data, "get_worker_info", lambda: object())
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    assert devices.must_avoid_cuda()
    assert devices.effective_device("cuda:0") == "cpu"
    assert devices.final_effective_device("cuda:0") == "cpu"  # a worker's answer is final
    assert devices.effective_device("cpu") == "cpu"
    devices._reset_after_fork()
    monkeypatch.undo()
    assert devices.effective_device("cuda:1") == "cuda:1"


def test_a_forked_child_that_is_no_worker_decides_on_every_call(
    monkeypatch: pytest.MonkeyPatch, fresh_process: None
) -> None:
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.delitem(sys.modules, "__mp_main__", raising=False)
    assert devices.effective_device("cuda:0") == "cpu"
    assert (
        devices.final_effective_device("cuda:0") is None
    )  # it may still become a worker  # main process: unchanged


def test_default_device_follows_local_rank(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert devices.default_device() == "cpu"
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("LOCAL_RANK", "2")
    assert devices.default_device() == "cuda:2"
    monkeypatch.delenv("LOCAL_RANK")
    assert devices.default_device() == "cuda:0"


def test_torchrun_ranks_shift_plan_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("LOCAL_RANK", "3")
    assert devices.device_for_rank("cuda:0") == "cuda:3"
    assert devices.device_for_rank("cuda:2") == "cuda:1"
    assert devices.device_for_rank("cpu") == "cpu"
    monkeypatch.delenv("LOCAL_RANK")
    assert devices.device_for_rank("cuda:0") == "cuda:0"


def test_spawned_children_may_use_cuda_forked_ones_not(
    monkeypatch: pytest.MonkeyPatch, fresh_process: None
) -> None:
    monkeypatch.setattr(multiprocessing, "parent_process", lambda: object())
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: False)
    monkeypatch.delitem(sys.modules, "__mp_main__", raising=False)
    assert devices.must_avoid_cuda()  # forked child
    devices._reset_after_fork()
    monkeypatch.setitem(sys.modules, "__mp_main__", sys.modules["__main__"])
    assert not devices.must_avoid_cuda()  # spawned child, e.g. a DDP rank

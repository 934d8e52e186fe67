"""Migrated calls in DataLoader workers run on the CPU, never initialize CUDA, never hang, and
equal the original."""

from __future__ import annotations

import multiprocessing

import cv2
import numpy as np
import pytest
import torch
from migrate_support import CALLS, make_registry, plan_for
from torch.utils.data import DataLoader, Dataset

import codedag.devices.workers as workers_devices
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
            workers_devices.must_avoid_cuda(),
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

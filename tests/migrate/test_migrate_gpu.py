"""The migrated path on CUDA: same results as the CPU reference, device values reused, pinned
staging, DataLoader workers that never touch CUDA. Skipped without CUDA."""

from __future__ import annotations

import multiprocessing

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

import codedag.devices.workers as workers_devices
from codedag.backends.names import canonical_name
from codedag.migrate.api import PipelineMigrator

pytestmark = pytest.mark.gpu


def _plan(names: list[str], device: str = "cuda:0") -> dict[str, object]:
    return {
        "schema_version": 1,
        "context_device_map": {f"app.f#0/{n}#0": device for n in names},
        "calls": [],
    }


def test_consecutive_calls_on_cuda_equal_the_cpu_and_reuse_device_values() -> None:
    img = np.random.default_rng(0).integers(0, 256, (240, 320, 3), dtype=np.uint8)
    ref = cv2.flip(cv2.resize(img, (224, 224)), 1)
    names = ["cv2.resize", "cv2.flip"]
    with PipelineMigrator.from_plan(_plan(names)) as migrator:
        got = cv2.flip(cv2.resize(img, (224, 224)), 1)
        got[0, 0, 0] ^= 1  # a user write after the call: the next call must see it
        again = cv2.flip(got, 1)
    assert type(got) is np.ndarray and got.dtype == np.uint8 and got.flags.c_contiguous
    got[0, 0, 0] ^= 1
    assert np.abs(got.astype(int) - ref.astype(int)).max() <= 1
    ref2 = ref.copy()
    ref2[0, 0, 0] ^= 1
    assert np.abs(again.astype(int) - cv2.flip(ref2, 1).astype(int)).max() <= 1
    stats = migrator.get_stats()
    assert stats["functions"]["cv2.flip"]["devices"] == {"cuda:0": 2}
    assert stats["value_cache"]["hits"] >= 1 and stats["value_cache"]["stale"] == 1


class _Images(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, i: int) -> tuple[torch.Tensor, bool, bool]:
        img = np.full((32, 32, 3), i, dtype=np.uint8)
        flipped = torch.from_numpy(cv2.flip(img, 0))
        return flipped, torch.cuda.is_initialized(), workers_devices.must_avoid_cuda()


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [0, 2])
def test_forked_workers_run_cuda_plans_on_the_cpu(workers: int) -> None:
    torch.zeros(1, device="cuda")  # the parent has CUDA initialized before forking
    context = multiprocessing.get_context("fork") if workers else None
    loader = DataLoader(
        _Images(), batch_size=4, num_workers=workers, multiprocessing_context=context
    )
    with PipelineMigrator.from_plan(_plan([canonical_name(cv2.flip)])):
        batches = list(loader)
    assert torch.cat([b[0] for b in batches]).shape == (8, 32, 32, 3)
    if workers:
        assert not bool(torch.cat([b[1] for b in batches]).any())
        assert bool(torch.cat([b[2] for b in batches]).all())  # ran on the CPU there

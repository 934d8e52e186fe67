"""Datasets with known per-sample costs for the loader tuning tests (module level: picklable)."""

from __future__ import annotations

import time

import torch
from torch.utils.data import Dataset


class SleepyDataset(Dataset):
    """Each sample sleeps ``sleep_s`` (I/O, decoding in a released-GIL library) and burns
    ``cpu_s`` of CPU: workers overlap the sleeps whatever the machine's load."""

    def __init__(self, n: int = 512, sleep_s: float = 0.012, cpu_s: float = 0.001) -> None:
        self.n = n
        self.sleep_s = sleep_s
        self.cpu_s = cpu_s

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, index: int) -> torch.Tensor:
        time.sleep(self.sleep_s)
        end = time.perf_counter() + self.cpu_s
        x = 0.0
        while time.perf_counter() < end:
            x += 1.0
        return torch.full((4,), float(index))


class FreeDataset(Dataset):
    """Samples that cost nothing: workers only add inter-process copies."""

    def __len__(self) -> int:
        return 4096

    def __getitem__(self, index: int) -> int:
        return index


def free_loader() -> torch.utils.data.DataLoader:
    """A DataLoader over :class:`FreeDataset` (a ``codedag tune`` target)."""
    return torch.utils.data.DataLoader(FreeDataset(), batch_size=8)


def slow_worker_start(worker_id: int) -> None:
    """A ``worker_init_fn`` that takes 0.4 s, like a worker that opens files or models first."""
    time.sleep(0.4)

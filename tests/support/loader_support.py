"""Datasets for the loader-settings tests (module level: workers can import them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch
from torch.utils.data import Dataset


class FreeDataset(Dataset):
    """Samples that cost nothing."""

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int) -> int:
        return index


class ThreadReport(Dataset):
    """Each sample reports the thread counts and the init marker seen where it loads."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> dict[str, Any]:
        import cv2

        from codedag.migrate.worker_threads import thread_counts

        counts = thread_counts()
        blas = counts["blas"] or {}
        return {
            "torch": counts["torch"],
            "cv2": int(cv2.getNumThreads()),
            "blas": max(blas.values()) if blas else -1,
            "marker": MARKER.get("init", "none"),
            "worker": int(torch.utils.data.get_worker_info().id)
            if torch.utils.data.get_worker_info()
            else -1,
        }


MARKER: dict[str, str] = {}


def user_init(worker_id: int) -> None:
    """The program's own worker_init_fn: leaves a marker the samples report."""
    MARKER["init"] = f"user-init-{worker_id}"
    np.random.seed(worker_id)


class RandomSamples(Dataset):
    """Each sample draws from Python's ``random``, NumPy's global state and torch's generator,
    as augmentations do in ``__getitem__``."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> torch.Tensor:
        import random

        draws = [random.random(), float(np.random.rand()), float(torch.rand(()))]
        return torch.tensor([float(index), *draws], dtype=torch.float64)


class PlainSamples(Dataset):
    """Samples that draw no random number."""

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([float(index), float(index) ** 0.5], dtype=torch.float64)


class HeldGenerator(Dataset):
    """Samples drawn from a NumPy generator the data set holds (not a global state)."""

    def __init__(self) -> None:
        self.rng = np.random.default_rng(0)

    def __len__(self) -> int:
        return 12

    def __getitem__(self, index: int) -> torch.Tensor:
        return torch.tensor([float(index), float(self.rng.random())], dtype=torch.float64)

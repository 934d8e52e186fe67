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

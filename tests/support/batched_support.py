"""Datasets, plans and comparisons shared by the batched-execution tests.

The datasets are written the way training code is: helper functions, operators, ``astype``,
``np.transpose``, random flips and affine matrices drawn per sample, ``torch.from_numpy`` at the
end. Images are small so that DataLoader workers start and finish quickly.
"""

from __future__ import annotations

import multiprocessing
from collections.abc import Callable, Iterable
from typing import Any

import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.batched.settings import BatchedSettings

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
CHAIN = ["cv2.resize", "cv2.cvtColor", "cv2.flip", "cv2.warpAffine"]
FORK = multiprocessing.get_context("fork")


def images(
    n: int, sizes: Iterable[tuple[int, int]] = ((48, 64),), seed: int = 0
) -> list[np.ndarray]:
    """``n`` random uint8 BGR images, sizes cycling through ``sizes`` (ragged when several)."""
    rng = np.random.default_rng(seed)
    sizes = list(sizes)
    return [rng.integers(0, 256, (*sizes[i % len(sizes)], 3), dtype=np.uint8) for i in range(n)]


def normalize(img: np.ndarray) -> np.ndarray:
    """A helper returning what it computes (operators and methods)."""
    img = img.astype(np.float32) / 255.0
    return (img - MEAN) / STD


class Augmented(Dataset):
    """resize, BGR->RGB, a random flip and affine (NumPy's global generator), normalize, CHW."""

    def __init__(
        self, data: list[np.ndarray], size: int = 24, flip_p: float = 0.5, affine: bool = True
    ) -> None:
        self.data = data
        self.size = size
        self.flip_p = flip_p
        self.affine = affine

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        img = cv2.resize(self.data[index], (self.size, self.size), interpolation=cv2.INTER_LINEAR)
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        if np.random.random() < self.flip_p:
            img = cv2.flip(img, 1)
        if self.affine:
            angle = float(np.random.uniform(-20.0, 20.0))
            scale = float(np.random.uniform(0.9, 1.1))
            half = self.size / 2.0
            matrix = cv2.getRotationMatrix2D((half, half), angle, scale)
            img = cv2.warpAffine(
                img, matrix, (self.size, self.size), borderMode=cv2.BORDER_REFLECT_101
            )
        img = np.transpose(normalize(img), (2, 0, 1))
        return torch.from_numpy(np.ascontiguousarray(img)), index


def plan(
    functions: list[str] | None = None,
    entries: list[str] | None = None,
    device: str = "cpu",
    entry_functions: list[str] | None = None,
) -> dict[str, Any]:
    """A plan running one chain batched (no per-call placements)."""
    functions = functions or list(CHAIN)
    return {
        "schema_version": 2,
        "context_device_map": {},
        "calls": [],
        "batched": {
            "mode": "always",
            "device": device,
            "chains": [
                {
                    "id": "chain0",
                    "functions": functions,
                    "entries": entries or [],
                    "entry_functions": entry_functions or [functions[0]],
                    "batched": True,
                }
            ],
        },
    }


def seed_worker(worker_id: int) -> None:
    """What training scripts do: seed NumPy from the worker's torch seed."""
    np.random.seed(torch.initial_seed() % 2**32)


def loader(dataset: Dataset, workers: int = 0, batch_size: int = 4, **options: Any) -> DataLoader:
    """A seeded DataLoader (the same batches with the same seed, patched or not)."""
    np.random.seed(1234)
    generator = torch.Generator().manual_seed(1234)
    extra: dict[str, Any] = {}
    if workers:
        extra = {"multiprocessing_context": FORK, "worker_init_fn": seed_worker}
    return DataLoader(
        dataset,
        batch_size=batch_size,
        num_workers=workers,
        generator=generator,
        **extra,
        **options,
    )


def run(
    make: Callable[[], DataLoader],
    the_plan: dict[str, Any] | None = None,
    settings: BatchedSettings | None = None,
) -> tuple[list[Any], list[Any], dict[str, Any]]:
    """Batches of ``make()`` without patches, then with the plan applied, and the stats."""
    reference = list(make())
    migrator = PipelineMigrator.from_plan(
        the_plan or plan(), guard=False, batched=settings or BatchedSettings(verify=0)
    )
    with migrator:
        batches = list(make())
    return reference, batches, migrator.get_stats()["batched"]


def max_level_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    """The largest difference of two normalized image batches, in uint8 levels of the input."""
    scale = 255.0 * torch.as_tensor(STD).view(1, 3, 1, 1)
    return float(((a - b).abs() * scale).max())

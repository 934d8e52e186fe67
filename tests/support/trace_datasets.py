"""A small image dataset and DataLoader factories for the DataLoader and CLI tests."""

from __future__ import annotations

import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class ImageDataset(Dataset):
    """Deterministic images, resized and normalized per sample."""

    def __init__(self, size: int = 16) -> None:
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, idx: int) -> tuple[np.ndarray, int]:
        image = self.load(idx)
        image = cv2.resize(image, (24, 24))
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        return cv2.normalize(image, None, 0.0, 1.0, cv2.NORM_MINMAX, dtype=cv2.CV_32F), idx % 3

    def load(self, idx: int) -> np.ndarray:
        return np.full((40, 40, 3), idx, dtype=np.uint8)


def loader(num_workers: int = 0, shuffle: bool = False) -> DataLoader:
    return DataLoader(ImageDataset(), batch_size=4, num_workers=num_workers, shuffle=shuffle)


def loader_two_workers() -> DataLoader:
    return loader(num_workers=2)


def pipeline() -> torch.Tensor:
    """A CLI target: one batch through the in-process loader."""
    return next(iter(loader()))[0]


def broken() -> None:
    raise RuntimeError("decoder exploded")


NOT_CALLABLE = 42


def needs_args(x: int) -> int:
    return x


class AugmentedDataset(Dataset):
    """Random augmentation drawing from Python's random, NumPy's global state, torch and a
    generator of the dataset's own; the worker's id goes into the sample too."""

    def __init__(self, size: int = 16) -> None:
        self.size = size
        self.rng = np.random.default_rng(7)

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, idx: int) -> tuple[np.ndarray, float, float, float, int]:
        import random

        from torch.utils.data import get_worker_info

        image = np.full((20, 20, 3), idx * 10, dtype=np.uint8)
        if random.random() < 0.5:
            image = image[:, ::-1]
        angle = float(np.random.uniform(-10, 10))
        matrix = cv2.getRotationMatrix2D((10, 10), angle, 1.0)
        image = cv2.warpAffine(image, matrix, (20, 20))
        jitter = float(torch.rand(1).item())
        noise = float(self.rng.normal())
        info = get_worker_info()
        worker = -1 if info is None else info.id
        return image.astype(np.float32) * (1 + jitter), angle, noise, random.random(), worker


def seed_offset(worker_id: int) -> None:
    """A worker_init_fn that reseeds NumPy from the worker's seed, as many projects do."""
    info = torch.utils.data.get_worker_info()
    np.random.seed((info.seed + 1000) % 2**32)


def augmented_loader(num_workers: int = 2, init: bool = False) -> DataLoader:
    return DataLoader(
        AugmentedDataset(),
        batch_size=4,
        shuffle=True,
        num_workers=num_workers,
        worker_init_fn=seed_offset if init else None,
    )

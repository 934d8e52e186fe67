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

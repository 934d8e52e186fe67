"""A pipeline written as training code writes it, and a plan with every section for it.

:class:`Photos` reads image files by path, resizes them (the prefix the cache keeps), converts
the colours (a call placed through torch), warps them by a random angle drawn with Python's
``random`` (in DataLoader workers too), normalizes with operators (a lookup-table run), flips
them at random with NumPy's generator and returns CHW tensors (a batched chain). :func:`plan`
gives each plan section for it, each made the way the optimizer writes it.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
SIZE = 32


class Photos(Dataset):
    """Image files on disk, decoded and augmented per sample."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        image = cv2.resize(image, (SIZE, SIZE), interpolation=cv2.INTER_AREA)
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        angle = random.uniform(-10.0, 10.0)
        matrix = cv2.getRotationMatrix2D((SIZE / 2, SIZE / 2), angle, 1.0)
        image = cv2.warpAffine(image, matrix, (SIZE, SIZE))
        image = (image.astype(np.float32) / 255.0 - MEAN) / STD
        if np.random.rand() < 0.5:
            image = cv2.flip(image, 1)
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), index


def loader(paths: list[str], workers: int = 0, **options: Any) -> DataLoader:
    """The pipeline's own loader, with its settings spelled out as real code does."""
    return DataLoader(Photos(paths), batch_size=4, shuffle=False, num_workers=workers, **options)

"""Data sets that draw with Python's ``random``, written the way training code writes them.

A module of its own so the tracer's filter sees it as user code.
"""

from __future__ import annotations

import random

import cv2
import numpy as np
import torch
from prefix_support import FileDataset

SIZE = 32


class WarpedImages(FileDataset):
    """imread, resized (the file's prefix), then shifted by a ``random.uniform`` offset: the
    warp's matrix is built from the drawn numbers outside any traced call."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        image = cv2.resize(image, (SIZE, SIZE), interpolation=cv2.INTER_AREA)
        dx, dy = random.uniform(-4, 4), random.uniform(-4, 4)
        matrix = np.float32([[1, 0, dx], [0, 1, dy]])
        image = cv2.warpAffine(image, matrix, (SIZE, SIZE))
        return torch.from_numpy(image), index


class Draws(torch.utils.data.Dataset):
    """Every kind of draw: ``random``'s module functions and a held ``random.Random``'s
    methods, Python-level (``uniform``) and C-level (``random``, ``getrandbits``)."""

    def __init__(self) -> None:
        self.rng = random.Random(0)

    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> torch.Tensor:
        order = [1, 2, 3]
        random.shuffle(order)
        x = random.random() + random.uniform(0, 1) + random.randint(0, 3) + random.gauss(0, 1)
        x += random.choice(order) + self.rng.random() + self.rng.uniform(0, 1)
        x += self.rng.getrandbits(3)
        return torch.full((2,), x + index)

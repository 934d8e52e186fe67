"""PIL the way Pillow's docs recommend: each file opened in a ``with`` block, then NumPy.

Each sample is a JPEG file read by path (written once into a folder by
:func:`~codedag.experiments.pipelines.pil_recipe.write_files`)::

    with Image.open(path) as im:
        im = im.convert("RGB").resize((size, size))

then ``np.asarray``, a random horizontal flip drawn with Python's ``random`` (by slicing),
scaled to 0..1 and normalized with ImageNet's mean and std with operators, HWC to CHW.

A batch is ``(images, labels)``: float32 ``(B, 3, size, size)`` and int64 ``(B,)``.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image

from codedag.experiments.pipelines.loaders import (
    FileDataset,
    check_sizes,
    data_folder,
    loader_maker,
)
from codedag.experiments.pipelines.pil_recipe import MEAN as MEAN
from codedag.experiments.pipelines.pil_recipe import STD as STD
from codedag.experiments.pipelines.pil_recipe import normalized_chw, write_files

DESCRIPTION = (
    "PIL as Pillow's docs recommend: `with Image.open(path) as im`, convert RGB, resize to a "
    "square, np.asarray, random horizontal flip (random), normalize, HWC->CHW"
)
CALLS = (
    "PIL.Image.open",
    "PIL.Image.Image.convert",
    "PIL.Image.Image.resize",
    "numpy.asarray",
    "numpy.ascontiguousarray",
    "torch.from_numpy",
)


@dataclass(eq=False, repr=False)
class PilWithDataset(FileDataset):
    """JPEG files opened in a ``with`` block to flipped, normalized CHW tensors with labels."""

    size: int = 224

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        with Image.open(self.paths[index]) as im:
            im = im.convert("RGB").resize((self.size, self.size))
        x = np.asarray(im)
        if random.random() < 0.5:
            x = x[:, ::-1]
        return normalized_chw(x.astype(np.float32) / 255.0), index % 4


def make_dataset(
    n: int = 64,
    seed: int = 0,
    size: int = 224,
    min_size: int = 320,
    max_size: int = 640,
    root: str | None = None,
) -> PilWithDataset:
    """``n`` JPEG files in ``root`` (default: a folder under the system's temporary folder)."""
    check_sizes(size=size)
    folder = data_folder(root, "codedag-pil-with")
    return PilWithDataset(write_files(folder, n, seed, min_size, max_size), size)


make_loader = loader_maker(make_dataset)

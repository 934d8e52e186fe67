"""3D medical segmentation preprocessing with NumPy: volumes on disk, cropped and flipped.

Each sample is a CT-like int16 volume in a ``.npy`` file (written once into a folder): loaded with
``numpy.load``, cast to float32, clipped to an intensity window, z-score normalized (the
intensity normalization of nnU-Net-style pipelines), then a random ``patch``-sized crop and
random flips along each axis drawn from NumPy's global generator, contiguous, to a tensor with a
channel axis.

A batch is ``(patches, labels)``: float32 ``(B, 1, P, P, P)`` and int64 ``(B,)``.
"""

from __future__ import annotations

import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from codedag.experiments.pipelines.loaders import (
    FileDataset,
    check_sizes,
    data_folder,
    loader_maker,
)
from codedag.util.io import atomic_write_bytes

DESCRIPTION = (
    "3D volume (medical segmentation): numpy.load of an int16 volume, float32, intensity clip "
    "and z-score, random patch crop, random flips, to a tensor"
)
CALLS = (
    "numpy.load",
    "numpy.ndarray.astype",
    "numpy.clip",
    "numpy.random.randint",
    "numpy.random.rand",
    "numpy.flip",
    "numpy.ascontiguousarray",
    "torch.from_numpy",
)
WINDOW = (-1000.0, 1000.0)
MEAN, STD = 40.0, 350.0


def write_volumes(folder: Path, n: int, seed: int, size: int) -> list[Path]:
    """Write ``n`` synthetic int16 volumes (``size``^3) into ``folder``; their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{seed}-{i:04d}-{size}.npy" for i in range(n)]
    if all(p.exists() for p in paths):
        return paths
    rng = np.random.default_rng(seed)
    grid = np.stack(np.meshgrid(*(np.linspace(-1, 1, size),) * 3, indexing="ij"))
    for i, path in enumerate(paths):
        center = rng.uniform(-0.4, 0.4, size=(3, 1, 1, 1))
        organ = (np.sqrt(((grid - center) ** 2).sum(0)) < 0.3 + 0.05 * (i % 4)) * 900
        noise = rng.normal(0, 40, size=(size,) * 3)
        volume = (organ - 500 + noise).astype(np.int16)
        buffer = io.BytesIO()
        np.save(buffer, volume)
        atomic_write_bytes(path, buffer.getvalue())  # the folder may be shared: never via a link
    return paths


@dataclass(eq=False, repr=False)
class VolumeDataset(FileDataset):
    """``.npy`` volumes to normalized, randomly cropped and flipped patches."""

    patch: int = 48

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        volume = np.load(self.paths[index])
        volume = volume.astype(np.float32)
        volume = np.clip(volume, *WINDOW)
        volume = (volume - MEAN) / STD
        p = self.patch
        corner = [np.random.randint(0, s - p + 1) for s in volume.shape]
        patch = volume[
            corner[0] : corner[0] + p, corner[1] : corner[1] + p, corner[2] : corner[2] + p
        ]
        for axis in range(3):
            if np.random.rand() < 0.5:
                patch = np.flip(patch, axis)
        return torch.from_numpy(np.ascontiguousarray(patch)[None]), index % 4


def make_dataset(
    n: int = 32, seed: int = 0, size: int = 96, patch: int = 48, root: str | None = None
) -> VolumeDataset:
    """``n`` volumes of ``size``^3 voxels in ``root`` (default: under the temporary folder)."""
    check_sizes(n=n, size=size, patch=patch)
    folder = data_folder(root, "codedag-volumes")
    return VolumeDataset(write_volumes(folder, n, seed, size), min(patch, size))


make_loader = loader_maker(make_dataset, batch_size=4, n=32)

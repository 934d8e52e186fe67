"""A torchvision-style classification recipe written with PIL: files on disk, opened per sample.

Each sample is a JPEG file read by path (an ImageFolder-like data set written once into a
folder): ``Image.open(path).convert("RGB")``, resized so its shorter side is ``resize``
(bilinear), then a random ``crop`` x ``crop`` crop and a random horizontal flip drawn with torch's
generator (as torchvision's ``RandomCrop`` and ``RandomHorizontalFlip`` draw them), to a float32
array scaled to 0..1, normalized with ImageNet's mean and std, HWC to CHW.

A batch is ``(images, labels)``: float32 ``(B, 3, crop, crop)`` and int64 ``(B,)``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from PIL import Image
from torch.utils.data import Dataset

from codedag.experiments.pipelines.loaders import check_sizes, data_folder, loader_maker
from codedag.experiments.pipelines.synthetic import make_images
from codedag.util.io import atomic_write_bytes

DESCRIPTION = (
    "torchvision-style PIL recipe: open a JPEG file, convert RGB, resize the shorter side, "
    "random crop, random horizontal flip, to a 0..1 array, normalize, HWC->CHW"
)
CALLS = (
    "PIL.Image.open",
    "PIL.Image.Image.convert",
    "PIL.Image.Image.resize",
    "torch.randint",
    "PIL.Image.Image.crop",
    "torch.rand",
    "PIL.Image.Image.transpose",
    "numpy.asarray",
    "torch.from_numpy",
)

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def normalized_chw(x: np.ndarray) -> torch.Tensor:
    """An HWC RGB float32 image scaled to 0..1, normalized with ImageNet's mean and std, as a
    contiguous CHW tensor."""
    x = (x - MEAN) / STD
    return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))


def write_files(folder: Path, n: int, seed: int, min_size: int, max_size: int) -> list[Path]:
    """Write ``n`` synthetic JPEG files into ``folder`` (kept when already there); their paths."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = [folder / f"{seed}-{i:05d}-{min_size}-{max_size}.jpg" for i in range(n)]
    if all(p.exists() for p in paths):
        return paths
    for path, sample in zip(paths, make_images(n, seed=seed, min_size=min_size, max_size=max_size)):
        atomic_write_bytes(path, sample.data)  # the folder may be shared: never via a link
    return paths


class PilRecipeDataset(Dataset):
    """JPEG files to randomly cropped, flipped, normalized CHW tensors with their labels."""

    def __init__(self, paths: list[Path], resize: int = 146, crop: int = 128) -> None:
        check_sizes(resize=resize, crop=crop)
        self.paths = [str(p) for p in paths]
        self.resize = resize
        self.crop = min(crop, resize)

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        img = Image.open(self.paths[index]).convert("RGB")
        width, height = img.size
        scale = self.resize / min(width, height)
        img = img.resize((round(width * scale), round(height * scale)), Image.Resampling.BILINEAR)
        width, height = img.size
        top = int(torch.randint(0, height - self.crop + 1, size=(1,)))
        left = int(torch.randint(0, width - self.crop + 1, size=(1,)))
        img = img.crop((left, top, left + self.crop, top + self.crop))
        if torch.rand(1) < 0.5:
            img = img.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        return normalized_chw(np.asarray(img, dtype=np.float32) / 255.0), index % 4


def make_dataset(
    n: int = 64,
    seed: int = 0,
    resize: int = 146,
    crop: int = 128,
    min_size: int = 320,
    max_size: int = 640,
    root: str | None = None,
) -> PilRecipeDataset:
    """``n`` JPEG files in ``root`` (default: a folder under the system's temporary folder)."""
    folder = data_folder(root, "codedag-pil-recipe")
    return PilRecipeDataset(write_files(folder, n, seed, min_size, max_size), resize, crop)


make_loader = loader_maker(make_dataset)

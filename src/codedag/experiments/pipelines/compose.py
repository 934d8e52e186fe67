"""Classification training augmentation as an albumentations-style ``Compose`` recipe.

Each sample is decoded with ``cv2.imdecode``, converted BGR to RGB, and run through
:func:`train_transforms`: resize, random crop, horizontal flip, random affine, one of three blurs,
brightness/contrast and hue/saturation/value jitter through LUTs, coarse dropout, normalize, and
a CHW tensor. The transforms are the objects of :mod:`~codedag.experiments.pipelines.transforms`;
their random draws come from ``random`` and ``np.random`` (seeded per worker).

A batch is ``(images, labels)``: float32 ``(B, 3, img_size, img_size)`` and int64 ``(B,)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import torch

from codedag.experiments.demo_data import SampleDataset
from codedag.experiments.pipelines.loaders import check_sizes, loader_maker
from codedag.experiments.pipelines.synthetic import make_images
from codedag.experiments.pipelines.transforms import (
    Affine,
    Blur,
    CoarseDropout,
    Compose,
    HorizontalFlip,
    HueSaturationValue,
    MedianBlur,
    MotionBlur,
    Normalize,
    OneOf,
    RandomBrightnessContrast,
    RandomCrop,
    Resize,
    ToTensor,
)

DESCRIPTION = (
    "albumentations-style Compose of transform objects: resize, random crop, flip, affine, "
    "one-of blurs, brightness/contrast and HSV LUTs, cutout, normalize, to tensor"
)
CALLS = (
    "numpy.frombuffer",
    "cv2.imdecode",
    "cv2.cvtColor",
    "cv2.resize",
    "cv2.flip",
    "cv2.getRotationMatrix2D",
    "cv2.warpAffine",
    "cv2.line",
    "cv2.filter2D",
    "cv2.medianBlur",
    "cv2.blur",
    "numpy.sum",
    "numpy.mean",
    "numpy.clip",
    "cv2.LUT",
    "cv2.split",
    "numpy.mod",
    "cv2.merge",
    "numpy.reciprocal",
    "torch.from_numpy",
)


def train_transforms(img_size: int = 256, resize_margin: float = 1.15) -> Compose:
    """The training recipe: a random ``img_size`` crop of the image resized ``resize_margin`` larger."""
    resized = round(img_size * resize_margin)
    return Compose(
        [
            Resize(resized, resized),
            RandomCrop(img_size, img_size),
            HorizontalFlip(p=0.5),
            Affine(rotate_limit=15, scale_limit=0.1, shift_limit=0.0625, p=0.5),
            OneOf([MotionBlur(5, p=0.3), MedianBlur(5, p=0.3), Blur(5, p=0.4)], p=0.3),
            RandomBrightnessContrast(0.2, 0.2, p=0.5),
            HueSaturationValue(20, 30, 20, p=0.5),
            CoarseDropout(max_holes=6, max_fraction=0.12, p=0.3),
            Normalize(),
            ToTensor(),
        ]
    )


@dataclass(eq=False, repr=False)
class ComposeDataset(SampleDataset):
    """Encoded images (:class:`~codedag.experiments.pipelines.synthetic.SyntheticImage`) through a
    ``transform`` (a callable on uint8 HWC RGB), with labels."""

    transform: Any

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        sample = self.samples[index]
        image = cv2.imdecode(np.frombuffer(sample.data, dtype=np.uint8), cv2.IMREAD_COLOR)
        if image is None:
            raise ValueError(f"sample {index} is not a decodable image")
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        return self.transform(image), sample.label


def make_dataset(
    n: int = 64,
    seed: int = 0,
    img_size: int = 256,
    min_size: int = 320,
    max_size: int = 640,
    image_format: str = "mixed",
) -> ComposeDataset:
    """``n`` synthetic images of ``min_size``..``max_size`` pixels, augmented to ``img_size``."""
    check_sizes(img_size=img_size)
    samples = make_images(
        n, seed=seed, min_size=min_size, max_size=max_size, image_format=image_format
    )
    return ComposeDataset(samples, train_transforms(img_size))


make_loader = loader_maker(make_dataset)

"""Detector-style inference preprocessing: letterbox, color conversion, blur, normalize.

Each sample is decoded with ``cv2.imdecode``, fitted into a square ``img_size`` canvas by
:func:`letterbox` (resize keeping the aspect ratio, then pad with gray through
``cv2.copyMakeBorder``, as YOLO's validation loader does), converted BGR to RGB, smoothed with a
Gaussian blur, normalized with ImageNet's mean and std written as operators, and transposed HWC
to CHW. Deterministic: no random draws.

A batch is ``(images, labels)``: float32 ``(B, 3, img_size, img_size)`` and int64 ``(B,)``.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from codedag.errors import ConfigError
from codedag.experiments.pipelines.loaders import check_sizes, loader_maker
from codedag.experiments.pipelines.synthetic import SyntheticImage, make_images

DESCRIPTION = (
    "detector inference preprocessing: imdecode, aspect-preserving resize + gray padding "
    "(letterbox), BGR->RGB, Gaussian blur, mean/std normalize, HWC->CHW"
)
CALLS = (
    "numpy.frombuffer",
    "cv2.imdecode",
    "cv2.resize",
    "cv2.copyMakeBorder",
    "cv2.cvtColor",
    "cv2.GaussianBlur",
    "numpy.ascontiguousarray",
    "torch.from_numpy",
)

MEAN_RGB = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD_RGB = np.array([0.229, 0.224, 0.225], dtype=np.float32)
PAD_COLOR = (114, 114, 114)


def letterbox(
    img: np.ndarray,
    new_shape: int | tuple[int, int] = 640,
    color: tuple[int, int, int] = PAD_COLOR,
    scaleup: bool = True,
) -> tuple[np.ndarray, float, tuple[float, float]]:
    """Resize ``img`` to fit ``new_shape`` keeping its aspect ratio, then pad it to that shape.

    Args:
        img: an HWC (or HW) uint8 image.
        new_shape: the output ``(height, width)``, or one int for a square.
        color: the padding color.
        scaleup: also enlarge images smaller than ``new_shape`` (False: only shrink).

    Returns:
        The padded image, the scale applied, and the padding ``(dw, dh)`` added on each side
        (half of the total; odd totals put the extra pixel on the bottom and right).
    """
    if isinstance(new_shape, int):
        new_shape = (new_shape, new_shape)
    height, width = img.shape[:2]
    ratio = min(new_shape[0] / height, new_shape[1] / width)
    if not scaleup:
        ratio = min(ratio, 1.0)
    resized_w, resized_h = round(width * ratio), round(height * ratio)
    dw = (new_shape[1] - resized_w) / 2
    dh = (new_shape[0] - resized_h) / 2
    if (width, height) != (resized_w, resized_h):
        img = cv2.resize(img, (resized_w, resized_h), interpolation=cv2.INTER_LINEAR)
    top, bottom = round(dh - 0.1), round(dh + 0.1)
    left, right = round(dw - 0.1), round(dw + 0.1)
    img = cv2.copyMakeBorder(img, top, bottom, left, right, cv2.BORDER_CONSTANT, value=color)
    return img, ratio, (dw, dh)


def normalize(
    img: np.ndarray, mean: np.ndarray = MEAN_RGB, std: np.ndarray = STD_RGB
) -> np.ndarray:
    """uint8 HWC RGB to float32 with zero mean and unit variance per channel."""
    img = img.astype(np.float32) / 255.0
    return (img - mean) / std


class LetterboxDataset(Dataset):
    """Encoded images to letterboxed, blurred, normalized CHW tensors with their class labels."""

    def __init__(
        self, samples: list[SyntheticImage], img_size: int = 416, blur_ksize: int = 3
    ) -> None:
        check_sizes(img_size=img_size, blur_ksize=blur_ksize)
        if blur_ksize % 2 == 0:
            raise ConfigError(f"blur_ksize must be odd, got {blur_ksize}")
        self.samples = samples
        self.img_size = img_size
        self.blur_ksize = blur_ksize

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        sample = self.samples[index]
        buffer = np.frombuffer(sample.data, dtype=np.uint8)
        img = cv2.imdecode(buffer, cv2.IMREAD_COLOR)
        if img is None:
            raise ValueError(f"sample {index} is not a decodable image")
        img, _, _ = letterbox(img, self.img_size)
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        img = cv2.GaussianBlur(img, (self.blur_ksize, self.blur_ksize), 0)
        x = normalize(img)
        x = x.transpose(2, 0, 1)
        x = np.ascontiguousarray(x)
        return torch.from_numpy(x), sample.label


def make_dataset(
    n: int = 64,
    seed: int = 0,
    img_size: int = 416,
    min_size: int = 320,
    max_size: int = 640,
    blur_ksize: int = 3,
    image_format: str = "jpg",
) -> LetterboxDataset:
    """``n`` synthetic images of ``min_size``..``max_size`` pixels, letterboxed to ``img_size``."""
    samples = make_images(
        n, seed=seed, min_size=min_size, max_size=max_size, image_format=image_format
    )
    return LetterboxDataset(samples, img_size=img_size, blur_ksize=blur_ksize)


make_loader = loader_maker(make_dataset)

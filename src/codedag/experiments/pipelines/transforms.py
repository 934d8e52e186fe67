"""Albumentations-style image transforms written with cv2 and NumPy.

Each transform is an object whose ``__call__(image)`` applies it with probability ``p``: it draws
``random.random() < p``, then its parameters (:meth:`Transform.get_params`, from ``random`` and
``np.random``), then :meth:`Transform.apply`. Images are uint8 HWC RGB until :class:`Normalize`
turns them into float32, and :class:`ToTensor` into a CHW tensor. The arithmetic follows what
such libraries do (LUTs for uint8 brightness/contrast and HSV shifts, ``np.mean``/``np.sum``
helpers, rotation matrices from ``cv2.getRotationMatrix2D``) so the pipeline makes the library
calls real training code makes.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np
import torch

from codedag.errors import ConfigError


class Transform:
    """A transform applied with probability ``p``."""

    def __init__(self, p: float = 1.0) -> None:
        if not 0.0 <= p <= 1.0:
            raise ConfigError(f"{type(self).__name__}: p must be in [0, 1], got {p!r}")
        self.p = p

    def __call__(self, image: np.ndarray) -> Any:
        if random.random() < self.p:
            return self.apply(image, **self.get_params(image))
        return image

    def get_params(self, image: np.ndarray) -> dict[str, Any]:
        """The random parameters of one application (none by default)."""
        return {}

    def apply(self, image: np.ndarray, **params: Any) -> Any:
        """The transform itself, with drawn parameters."""
        raise NotImplementedError


class Compose:
    """Apply ``transforms`` in order."""

    def __init__(self, transforms: Sequence[Any]) -> None:
        self.transforms = list(transforms)

    def __call__(self, image: np.ndarray) -> Any:
        for transform in self.transforms:
            image = transform(image)
        return image


class OneOf(Transform):
    """With probability ``p``, apply one of ``transforms``, chosen with weights their ``p``."""

    def __init__(self, transforms: Sequence[Transform], p: float = 0.5) -> None:
        super().__init__(p)
        if not transforms:
            raise ConfigError("OneOf needs at least one transform")
        self.transforms = list(transforms)
        weights = np.array([t.p for t in self.transforms], dtype=np.float64)
        if np.sum(weights) <= 0:
            raise ConfigError("OneOf: the transforms' probabilities sum to 0")
        self.weights = weights / np.sum(weights)

    def __call__(self, image: np.ndarray) -> Any:
        if random.random() < self.p:
            chosen = self.transforms[np.random.choice(len(self.transforms), p=self.weights)]
            return chosen.apply(image, **chosen.get_params(image))
        return image


class Resize(Transform):
    """Resize to ``height`` x ``width`` (aspect ratio not kept)."""

    def __init__(
        self, height: int, width: int, interpolation: int = cv2.INTER_LINEAR, p: float = 1.0
    ) -> None:
        super().__init__(p)
        self.height, self.width, self.interpolation = height, width, interpolation

    def apply(self, image: np.ndarray, **params: Any) -> np.ndarray:
        return cv2.resize(image, (self.width, self.height), interpolation=self.interpolation)


class RandomCrop(Transform):
    """Crop a random ``height`` x ``width`` window (a view: no copy)."""

    def __init__(self, height: int, width: int, p: float = 1.0) -> None:
        super().__init__(p)
        self.height, self.width = height, width

    def get_params(self, image: np.ndarray) -> dict[str, Any]:
        rows, cols = image.shape[:2]
        if rows < self.height or cols < self.width:
            raise ConfigError(
                f"RandomCrop of {self.height}x{self.width} needs an image at least that large, "
                f"got {rows}x{cols}"
            )
        return {
            "y": np.random.randint(0, rows - self.height + 1),
            "x": np.random.randint(0, cols - self.width + 1),
        }

    def apply(self, image: np.ndarray, y: int = 0, x: int = 0, **params: Any) -> np.ndarray:
        return image[y : y + self.height, x : x + self.width]


class HorizontalFlip(Transform):
    """Mirror left to right."""

    def __init__(self, p: float = 0.5) -> None:
        super().__init__(p)

    def apply(self, image: np.ndarray, **params: Any) -> np.ndarray:
        return cv2.flip(image, 1)


class Affine(Transform):
    """Random rotation, scale and translation about the center, reflecting at the borders."""

    def __init__(
        self,
        rotate_limit: float = 15.0,
        scale_limit: float = 0.1,
        shift_limit: float = 0.0625,
        border_mode: int = cv2.BORDER_REFLECT_101,
        p: float = 0.5,
    ) -> None:
        super().__init__(p)
        self.rotate_limit, self.scale_limit, self.shift_limit = (
            rotate_limit,
            scale_limit,
            shift_limit,
        )
        self.border_mode = border_mode

    def get_params(self, image: np.ndarray) -> dict[str, Any]:
        return {
            "angle": random.uniform(-self.rotate_limit, self.rotate_limit),
            "scale": random.uniform(1 - self.scale_limit, 1 + self.scale_limit),
            "dx": random.uniform(-self.shift_limit, self.shift_limit),
            "dy": random.uniform(-self.shift_limit, self.shift_limit),
        }

    def apply(
        self,
        image: np.ndarray,
        angle: float = 0,
        scale: float = 1,
        dx: float = 0,
        dy: float = 0,
        **params: Any,
    ) -> np.ndarray:
        height, width = image.shape[:2]
        matrix = cv2.getRotationMatrix2D((width / 2, height / 2), angle, scale)
        matrix[0, 2] += dx * width
        matrix[1, 2] += dy * height
        return cv2.warpAffine(
            image, matrix, (width, height), flags=cv2.INTER_LINEAR, borderMode=self.border_mode
        )


def _odd_kernel_size(blur_limit: int) -> int:
    return random.choice(range(3, max(blur_limit, 3) + 1, 2))


class BlurBase(Transform):
    """A blur whose odd kernel size is drawn up to ``blur_limit``."""

    def __init__(self, blur_limit: int = 5, p: float = 0.5) -> None:
        super().__init__(p)
        self.blur_limit = blur_limit

    def get_params(self, image: np.ndarray) -> dict[str, Any]:
        return {"ksize": _odd_kernel_size(self.blur_limit)}


class Blur(BlurBase):
    """Box blur with a random odd kernel size up to ``blur_limit``."""

    def apply(self, image: np.ndarray, ksize: int = 3, **params: Any) -> np.ndarray:
        return cv2.blur(image, (ksize, ksize))


class MedianBlur(BlurBase):
    """Median blur with a random odd kernel size up to ``blur_limit``."""

    def apply(self, image: np.ndarray, ksize: int = 3, **params: Any) -> np.ndarray:
        return cv2.medianBlur(image, ksize)


class MotionBlur(BlurBase):
    """Blur along a random line: the kernel is a drawn line normalized to sum 1."""

    def get_params(self, image: np.ndarray) -> dict[str, Any]:
        ksize = _odd_kernel_size(self.blur_limit)
        kernel = np.zeros((ksize, ksize), dtype=np.uint8)
        x1, x2 = random.randint(0, ksize - 1), random.randint(0, ksize - 1)
        if x1 == x2:
            y1, y2 = random.sample(range(ksize), 2)
        else:
            y1, y2 = random.randint(0, ksize - 1), random.randint(0, ksize - 1)
        cv2.line(kernel, (x1, y1), (x2, y2), 1, thickness=1)
        return {"kernel": kernel.astype(np.float32) / np.sum(kernel)}

    def apply(self, image: np.ndarray, kernel: Any = None, **params: Any) -> np.ndarray:
        return cv2.filter2D(image, ddepth=-1, kernel=kernel)


class RandomBrightnessContrast(Transform):
    """Scale contrast by ``alpha`` and shift brightness by ``beta`` (of 255 or of the mean)."""

    def __init__(
        self,
        brightness_limit: float = 0.2,
        contrast_limit: float = 0.2,
        brightness_by_max: bool = False,
        p: float = 0.5,
    ) -> None:
        super().__init__(p)
        self.brightness_limit, self.contrast_limit = brightness_limit, contrast_limit
        self.brightness_by_max = brightness_by_max

    def get_params(self, image: np.ndarray) -> dict[str, Any]:
        return {
            "alpha": 1.0 + random.uniform(-self.contrast_limit, self.contrast_limit),
            "beta": random.uniform(-self.brightness_limit, self.brightness_limit),
        }

    def apply(
        self, image: np.ndarray, alpha: float = 1, beta: float = 0, **params: Any
    ) -> np.ndarray:
        lut = np.arange(0, 256, dtype=np.float32) * alpha
        if self.brightness_by_max:
            lut += beta * 255
        else:
            lut += beta * np.mean(image)
        lut = np.clip(lut, 0, 255).astype(np.uint8)
        return cv2.LUT(image, lut)


class HueSaturationValue(Transform):
    """Shift hue (cv2's 0..179 scale), saturation and value through per-channel LUTs."""

    def __init__(
        self,
        hue_shift_limit: float = 20,
        sat_shift_limit: float = 30,
        val_shift_limit: float = 20,
        p: float = 0.5,
    ) -> None:
        super().__init__(p)
        self.limits = (hue_shift_limit, sat_shift_limit, val_shift_limit)

    def get_params(self, image: np.ndarray) -> dict[str, Any]:
        hue, sat, val = (random.uniform(-limit, limit) for limit in self.limits)
        return {"hue_shift": hue, "sat_shift": sat, "val_shift": val}

    def apply(
        self,
        image: np.ndarray,
        hue_shift: float = 0,
        sat_shift: float = 0,
        val_shift: float = 0,
        **params: Any,
    ) -> np.ndarray:
        hsv = cv2.cvtColor(image, cv2.COLOR_RGB2HSV)
        hue, sat, val = cv2.split(hsv)
        x = np.arange(0, 256, dtype=np.float32)
        lut_hue = np.mod(x + hue_shift, 180).astype(np.uint8)
        lut_sat = np.clip(x + sat_shift, 0, 255).astype(np.uint8)
        lut_val = np.clip(x + val_shift, 0, 255).astype(np.uint8)
        hsv = cv2.merge((cv2.LUT(hue, lut_hue), cv2.LUT(sat, lut_sat), cv2.LUT(val, lut_val)))
        return cv2.cvtColor(hsv, cv2.COLOR_HSV2RGB)


class CoarseDropout(Transform):
    """Fill up to ``max_holes`` random rectangles with ``fill_value`` (cutout)."""

    def __init__(
        self, max_holes: int = 6, max_fraction: float = 0.12, fill_value: int = 0, p: float = 0.5
    ) -> None:
        super().__init__(p)
        self.max_holes, self.max_fraction, self.fill_value = max_holes, max_fraction, fill_value

    def get_params(self, image: np.ndarray) -> dict[str, Any]:
        rows, cols = image.shape[:2]
        holes = []
        for _ in range(np.random.randint(1, self.max_holes + 1)):
            hole_h = max(1, int(rows * self.max_fraction * random.random()))
            hole_w = max(1, int(cols * self.max_fraction * random.random()))
            y1, x1 = random.randint(0, rows - hole_h), random.randint(0, cols - hole_w)
            holes.append((y1, x1, y1 + hole_h, x1 + hole_w))
        return {"holes": holes}

    def apply(self, image: np.ndarray, holes: Any = (), **params: Any) -> np.ndarray:
        image = image.copy()
        for y1, x1, y2, x2 in holes:
            image[y1:y2, x1:x2] = self.fill_value
        return image


class Normalize(Transform):
    """uint8 to float32: ``(image - mean * max_pixel) / (std * max_pixel)`` per channel."""

    def __init__(
        self,
        mean: Sequence[float] = (0.485, 0.456, 0.406),
        std: Sequence[float] = (0.229, 0.224, 0.225),
        max_pixel_value: float = 255.0,
        p: float = 1.0,
    ) -> None:
        super().__init__(p)
        self.mean = np.array(mean, dtype=np.float32) * max_pixel_value
        self.denominator = np.reciprocal(np.array(std, dtype=np.float32) * max_pixel_value)

    def apply(self, image: np.ndarray, **params: Any) -> np.ndarray:
        image = image.astype(np.float32)
        return (image - self.mean) * self.denominator


class ToTensor(Transform):
    """HWC array to a CHW tensor sharing its memory."""

    def apply(self, image: np.ndarray, **params: Any) -> torch.Tensor:
        return torch.from_numpy(image.transpose(2, 0, 1))

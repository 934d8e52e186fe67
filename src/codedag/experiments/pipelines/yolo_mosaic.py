"""YOLO-style detection training: mosaic, random perspective, HSV jitter, flips, letterbox.

With probability ``hyp["mosaic"]`` a sample is a mosaic: the image and three random others,
each loaded by :meth:`YoloMosaicDataset.load_image` (imdecode, resize so the long side is
``img_size``), placed around a random center of a 2s x 2s canvas filled with 114 by slice
assignment, boxes shifted with them; :func:`random_perspective` then warps the canvas down to
s x s. Otherwise the image is loaded alone and letterboxed to s x s. Then HSV jitter through
LUTs, random vertical and horizontal flips with the labels mirrored, HWC BGR to CHW RGB,
contiguous, ``torch.from_numpy``. Random draws come from ``random`` and ``np.random``.

A sample is ``(image, labels)``: uint8 ``(3, img_size, img_size)`` and float32 ``(k, 6)`` rows
``0, class, x_center, y_center, width, height`` (normalized). :func:`collate_fn` stacks the
images to ``(B, 3, img_size, img_size)`` and concatenates the labels to ``(N, 6)`` with each
row's image index in column 0.
"""

from __future__ import annotations

import random

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from codedag.errors import ConfigError
from codedag.experiments.pipelines.letterbox import letterbox
from codedag.experiments.pipelines.loaders import check_sizes, loader_maker
from codedag.experiments.pipelines.synthetic import SyntheticImage, make_images
from codedag.experiments.pipelines.yolo_augment import (
    FILL_VALUE,
    augment_hsv,
    random_perspective,
    xywhn2xyxy,
    xyxy2xywhn,
)

DESCRIPTION = (
    "YOLO-style detection training: 4-image mosaic on a 114-filled canvas, random perspective "
    "warp with boxes, HSV jitter via LUTs, flips, letterbox, CHW, YOLO collate"
)
AUGMENT_CALLS = (
    "cv2.cvtColor",
    "cv2.split",
    "cv2.LUT",
    "cv2.merge",
    "numpy.flipud",
    "numpy.fliplr",
    "numpy.ascontiguousarray",
    "torch.from_numpy",
    "torch.stack",
    "torch.cat",
)
"""The calls of :func:`augment_sample` after its warp (HSV jitter, flips, CHW) and of
:func:`collate_fn`."""
CALLS = (
    "numpy.frombuffer",
    "cv2.imdecode",
    "cv2.resize",
    "numpy.full",
    "numpy.concatenate",
    "numpy.clip",
    "cv2.copyMakeBorder",
    "cv2.getRotationMatrix2D",
    "cv2.warpAffine",
    "cv2.warpPerspective",
    *AUGMENT_CALLS,
)

DEFAULT_HYP: dict[str, float] = {
    "mosaic": 0.8,  # probability of a mosaic sample
    "degrees": 10.0,  # rotation, +/- degrees
    "translate": 0.1,  # translation, +/- fraction of the output
    "scale": 0.5,  # zoom, +/- gain
    "shear": 2.0,  # shear, +/- degrees
    "perspective": 0.0,  # perspective, +/- (0 keeps the warp affine)
    "hsv_h": 0.015,  # hue gain, +/- fraction
    "hsv_s": 0.7,  # saturation gain
    "hsv_v": 0.4,  # value gain
    "flipud": 0.1,  # probability of a vertical flip
    "fliplr": 0.5,  # probability of a horizontal flip
}


class YoloMosaicDataset(Dataset):
    """Encoded images with YOLO boxes to augmented ``(image, labels)`` training samples."""

    def __init__(
        self,
        samples: list[SyntheticImage],
        img_size: int = 416,
        hyp: dict[str, float] | None = None,
    ) -> None:
        check_sizes(img_size=img_size)
        if img_size % 2:
            raise ConfigError(f"img_size must be even (the mosaic is 2x its size), got {img_size}")
        self.samples = samples
        self.img_size = img_size
        self.hyp = with_defaults(hyp, DEFAULT_HYP)
        self.indices = range(len(samples))

    def __len__(self) -> int:
        return len(self.samples)

    def load_image(self, index: int) -> tuple[np.ndarray, tuple[int, int], tuple[int, int]]:
        """Decode image ``index`` and resize it so its long side is ``img_size``.

        Returns:
            The image, its original ``(height, width)`` and its resized ``(height, width)``.
        """
        img = cv2.imdecode(np.frombuffer(self.samples[index].data, np.uint8), cv2.IMREAD_COLOR)
        if img is None:
            raise ValueError(f"sample {index} is not a decodable image")
        h0, w0 = img.shape[:2]
        img = resize_long_side(img, self.img_size)
        return img, (h0, w0), (img.shape[0], img.shape[1])

    def load_mosaic(self, index: int) -> tuple[np.ndarray, np.ndarray]:
        """Image ``index`` and three random others around a random center of a 2s x 2s canvas.

        Returns:
            The uint8 canvas and the boxes as (n, 5) rows ``class, x1, y1, x2, y2`` in canvas
            pixels, clipped to the canvas.
        """
        s = self.img_size
        xc, yc = (int(random.uniform(s // 2, 3 * s // 2)) for _ in range(2))
        indices = [index, *random.choices(self.indices, k=3)]
        random.shuffle(indices)
        img4 = np.full((2 * s, 2 * s, 3), FILL_VALUE, dtype=np.uint8)
        labels4 = []
        for quadrant, idx in enumerate(indices):
            img, _, (h, w) = self.load_image(idx)
            # top left, top right, bottom left, bottom right: a corner of each image at the center
            x0 = xc - w if quadrant in (0, 2) else xc
            y0 = yc - h if quadrant in (0, 1) else yc
            x1a, y1a = max(x0, 0), max(y0, 0)
            x2a, y2a = min(x0 + w, 2 * s), min(y0 + h, 2 * s)
            img4[y1a:y2a, x1a:x2a] = img[y1a - y0 : y2a - y0, x1a - x0 : x2a - x0]
            labels = self.samples[idx].boxes.copy()
            labels[:, 1:] = xywhn2xyxy(labels[:, 1:], w, h, padw=x0, padh=y0)
            labels4.append(labels)
        boxes = np.concatenate(labels4, 0)
        np.clip(boxes[:, 1:], 0, 2 * s, out=boxes[:, 1:])
        return img4, boxes

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        if random.random() < self.hyp["mosaic"]:
            img, labels = self.load_mosaic(index)
            border = (-(self.img_size // 2), -(self.img_size // 2))
        else:
            img, _, _ = self.load_image(index)
            img, labels = letterbox_boxes(img, self.samples[index].boxes, self.img_size)
            border = (0, 0)
        return augment_sample(img, labels, self.hyp, border)


def with_defaults(hyp: dict[str, float] | None, defaults: dict[str, float]) -> dict[str, float]:
    """``defaults`` with the entries of ``hyp``; a name ``defaults`` lacks is a ConfigError."""
    unknown = sorted(set(hyp or {}) - set(defaults))
    if unknown:
        raise ConfigError(
            f"unknown hyperparameter(s) {', '.join(unknown)}; known: {', '.join(defaults)}"
        )
    return {**defaults, **(hyp or {})}


def resize_long_side(img: np.ndarray, size: int) -> np.ndarray:
    """``img`` resized (bilinear) so that its long side is ``size``."""
    h0, w0 = img.shape[:2]
    ratio = size / max(h0, w0)
    if ratio != 1:
        new_size = (max(1, round(w0 * ratio)), max(1, round(h0 * ratio)))
        img = cv2.resize(img, new_size, interpolation=cv2.INTER_LINEAR)
    return img


def letterbox_boxes(
    img: np.ndarray, boxes: np.ndarray, img_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """``img`` letterboxed to ``img_size`` square (never enlarged) and a copy of its normalized
    ``class, x, y, w, h`` boxes as ``class, x1, y1, x2, y2`` pixel rows of the result."""
    h, w = img.shape[:2]
    img, ratio, (dw, dh) = letterbox(img, img_size, scaleup=False)
    labels = boxes.copy()
    if len(labels):
        labels[:, 1:] = xywhn2xyxy(labels[:, 1:], ratio * w, ratio * h, padw=dw, padh=dh)
    return img, labels


def augment_sample(
    img: np.ndarray, labels: np.ndarray, hyp: dict[str, float], border: tuple[int, int] = (0, 0)
) -> tuple[torch.Tensor, torch.Tensor]:
    """A training sample from an image and its pixel boxes: random perspective (``border`` as
    :func:`random_perspective` takes it), HSV jitter, random flips with the labels mirrored,
    HWC BGR to CHW RGB; the labels as ``(k, 6)`` rows ``0, class, x, y, w, h`` (normalized)."""
    img, labels = random_perspective(
        img,
        labels,
        degrees=hyp["degrees"],
        translate=hyp["translate"],
        scale=hyp["scale"],
        shear=hyp["shear"],
        perspective=hyp["perspective"],
        border=border,
    )
    nl = len(labels)
    if nl:
        labels[:, 1:5] = xyxy2xywhn(labels[:, 1:5], w=img.shape[1], h=img.shape[0], clip=True)
    img = augment_hsv(img, hgain=hyp["hsv_h"], sgain=hyp["hsv_s"], vgain=hyp["hsv_v"])
    if random.random() < hyp["flipud"]:
        img = np.flipud(img)
        if nl:
            labels[:, 2] = 1 - labels[:, 2]
    if random.random() < hyp["fliplr"]:
        img = np.fliplr(img)
        if nl:
            labels[:, 1] = 1 - labels[:, 1]
    labels_out = torch.zeros((nl, 6))
    if nl:
        labels_out[:, 1:] = torch.from_numpy(labels)
    img = img.transpose((2, 0, 1))[::-1]  # HWC to CHW, BGR to RGB
    img = np.ascontiguousarray(img)
    return torch.from_numpy(img), labels_out


def collate_fn(batch: list[tuple[torch.Tensor, torch.Tensor]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Stack the images; concatenate the labels with each row's image index in column 0."""
    images, labels = zip(*batch)
    for i, label in enumerate(labels):
        label[:, 0] = i
    return torch.stack(images, 0), torch.cat(labels, 0)


def make_dataset(
    n: int = 64,
    seed: int = 0,
    img_size: int = 416,
    min_size: int = 320,
    max_size: int = 640,
    image_format: str = "jpg",
    hyp: dict[str, float] | None = None,
) -> YoloMosaicDataset:
    """``n`` synthetic images with boxes; ``hyp`` overrides entries of :data:`DEFAULT_HYP`."""
    samples = make_images(
        n, seed=seed, min_size=min_size, max_size=max_size, image_format=image_format
    )
    return YoloMosaicDataset(samples, img_size=img_size, hyp=hyp)


make_loader = loader_maker(
    make_dataset,
    collate_fn=collate_fn,
    batching=" batching with :func:`collate_fn`",
)

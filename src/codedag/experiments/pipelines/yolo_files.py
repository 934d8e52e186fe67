"""YOLO-style detection training from image files on disk: imread, letterbox, warp, HSV, flips.

Each sample is a JPEG file with a YOLO label file beside it (``class x_center y_center width
height`` rows, normalized), written once into a folder; the labels are read once when the data
set is built, as YOLO's label cache holds them. Per sample: ``cv2.imread``, resized so its long
side is ``img_size``, :func:`~codedag.experiments.pipelines.letterbox.letterbox` to a square
(without enlarging), :func:`~codedag.experiments.pipelines.yolo_augment.random_perspective` with
its boxes, HSV gains through LUTs (``augment_hsv``), random vertical and horizontal flips with
the labels mirrored, HWC BGR to CHW RGB, contiguous, ``torch.from_numpy``. Random draws come from
``random`` and ``np.random``.

:func:`make_loader` is written as YOLO's dataloader factory is: the worker count is computed
from its argument (at most the CPUs, none for a batch of one) and passed explicitly,
``DataLoader(..., num_workers=nw, ...)``.

A sample is ``(image, labels)``: uint8 ``(3, img_size, img_size)`` and float32 ``(k, 6)`` rows
``0, class, x_center, y_center, width, height``. Batches are collated as ``yolo_mosaic``'s:
``(B, 3, img_size, img_size)`` images and ``(N, 6)`` labels with each row's image index in
column 0.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.experiments.pipelines.loaders import (
    check_loader_settings,
    check_sizes,
    data_folder,
    loader_from_factory,
)
from codedag.experiments.pipelines.pil_recipe import write_files
from codedag.experiments.pipelines.synthetic import make_images
from codedag.experiments.pipelines.yolo_mosaic import (
    AUGMENT_CALLS,
    augment_sample,
    collate_fn,
    letterbox_boxes,
    resize_long_side,
    with_defaults,
)
from codedag.experiments.pipelines.yolo_mosaic import DEFAULT_HYP as MOSAIC_HYP
from codedag.util.io import atomic_write_text

DESCRIPTION = (
    "YOLO-style detection from files: cv2.imread, resize, letterbox, random perspective warp "
    "with boxes, HSV gains via LUTs, flips, CHW; workers passed explicitly as YOLO's factory does"
)
CALLS = (
    "cv2.imread",
    "cv2.resize",
    "cv2.copyMakeBorder",
    "cv2.getRotationMatrix2D",
    "cv2.warpAffine",
    *AUGMENT_CALLS,
)

DEFAULT_HYP: dict[str, float] = {k: v for k, v in MOSAIC_HYP.items() if k != "mosaic"}


def write_dataset(folder: Path, n: int, seed: int, min_size: int, max_size: int) -> list[Path]:
    """Write ``n`` JPEG files and their YOLO label files (``.txt`` beside each) into ``folder``
    (kept when already there); the images' paths."""
    paths = write_files(folder, n, seed, min_size, max_size)
    samples = make_images(n, seed=seed, min_size=min_size, max_size=max_size)
    for path, sample in zip(paths, samples):
        label_path = path.with_suffix(".txt")
        if label_path.exists():
            continue
        rows = "".join(
            f"{int(c)} {x:.6f} {y:.6f} {w:.6f} {h:.6f}\n" for c, x, y, w, h in sample.boxes
        )
        atomic_write_text(label_path, rows)  # the folder may be shared: never via a link
    return paths


def read_labels(path: Path) -> np.ndarray:
    """The float32 ``(k, 5)`` rows of a YOLO label file (``(0, 5)`` when it has none)."""
    rows = [line.split() for line in path.read_text().strip().splitlines()]
    return np.array(rows, dtype=np.float32).reshape(-1, 5)


class YoloFilesDataset(Dataset):
    """Image files with YOLO label files to augmented ``(image, labels)`` training samples."""

    def __init__(
        self, paths: list[Path], img_size: int = 416, hyp: dict[str, float] | None = None
    ) -> None:
        check_sizes(img_size=img_size)
        self.im_files = [str(p) for p in paths]
        self.labels = [read_labels(Path(p).with_suffix(".txt")) for p in paths]
        self.img_size = img_size
        self.hyp = with_defaults(hyp, DEFAULT_HYP)

    def __len__(self) -> int:
        return len(self.im_files)

    def load_image(self, index: int) -> tuple[np.ndarray, tuple[int, int]]:
        """Read image ``index`` and resize it so its long side is ``img_size``; its new
        ``(height, width)``."""
        img = cv2.imread(self.im_files[index])
        if img is None:
            raise FileNotFoundError(f"image not found or not decodable: {self.im_files[index]}")
        img = resize_long_side(img, self.img_size)
        return img, (img.shape[0], img.shape[1])

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        img, _ = self.load_image(index)
        img, labels = letterbox_boxes(img, self.labels[index], self.img_size)
        return augment_sample(img, labels, self.hyp)


def make_dataset(
    n: int = 64,
    seed: int = 0,
    img_size: int = 416,
    min_size: int = 320,
    max_size: int = 640,
    hyp: dict[str, float] | None = None,
    root: str | None = None,
) -> YoloFilesDataset:
    """``n`` image and label files in ``root`` (default: a folder under the system's temporary
    folder); ``hyp`` overrides entries of :data:`DEFAULT_HYP`."""
    check_sizes(n=n)
    folder = data_folder(root, "codedag-yolo-files")
    paths = write_dataset(folder, n, seed, min_size, max_size)
    return YoloFilesDataset(paths, img_size=img_size, hyp=hyp)


def make_loader(
    batch_size: int = 16,
    num_workers: int = 0,
    seed: int = 0,
    *,
    n: int = 64,
    shuffle: bool = True,
    **options: Any,
) -> DataLoader:
    """A DataLoader over :func:`make_dataset` batching with ``yolo_mosaic``'s ``collate_fn``,
    its worker count computed as YOLO's ``build_dataloader`` does (at most the CPUs and
    ``num_workers``, none for a batch of one) and passed explicitly.

    Dataset options: ``img_size``, ``min_size``, ``max_size``, ``hyp``, ``root``. Loader options:
    ``drop_last``, ``pin_memory``, ``persistent_workers``, ``prefetch_factor``.
    """
    check_loader_settings(batch_size, num_workers, seed)
    nw = min(os.cpu_count() or 1, batch_size if batch_size > 1 else 0, num_workers)
    return loader_from_factory(
        make_dataset,
        batch_size,
        nw,
        seed,
        n=n,
        shuffle=shuffle,
        options=options,
        collate_fn=collate_fn,
    )

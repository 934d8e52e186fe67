"""YOLO-style detection from files: label files beside the images, imread, letterbox, warp,
HSV, flips, and the worker count computed as YOLO's factory does and passed explicitly."""

from __future__ import annotations

import os
from pathlib import Path

import cv2
import numpy as np
import pytest
import torch

import codedag.experiments.pipelines.yolo_files as yolo_files
from codedag.errors import ConfigError
from codedag.experiments.pipelines.letterbox import letterbox
from codedag.experiments.pipelines.synthetic import make_images

NEUTRAL = {
    "degrees": 0.0,
    "translate": 0.0,
    "scale": 0.0,
    "shear": 0.0,
    "hsv_h": 0.0,
    "hsv_s": 0.0,
    "hsv_v": 0.0,
    "flipud": 0.0,
    "fliplr": 0.0,
}


def test_label_files_hold_the_images_boxes(tmp_path: Path) -> None:
    paths = yolo_files.write_dataset(tmp_path, 3, seed=2, min_size=40, max_size=64)
    samples = make_images(3, seed=2, min_size=40, max_size=64)
    for path, sample in zip(paths, samples):
        assert cv2.imread(str(path)).shape == (sample.height, sample.width, 3)
        labels = yolo_files.read_labels(path.with_suffix(".txt"))
        assert labels.dtype == np.float32 and np.allclose(labels, sample.boxes, atol=1e-6)
    assert yolo_files.read_labels(_empty(tmp_path)).shape == (0, 5)


def _empty(folder: Path) -> Path:
    path = folder / "empty.txt"
    path.write_text("")
    return path


def test_without_augmentation_a_sample_is_the_letterboxed_file(tmp_path: Path) -> None:
    dataset = yolo_files.make_dataset(n=2, img_size=64, min_size=40, max_size=96, hyp=NEUTRAL,
                                      root=str(tmp_path))  # fmt: skip
    image, labels = dataset[1]
    assert image.dtype == torch.uint8 and tuple(image.shape) == (3, 64, 64)
    img = cv2.imread(dataset.im_files[1])
    ratio = 64 / max(img.shape[:2])
    img = cv2.resize(img, (round(img.shape[1] * ratio), round(img.shape[0] * ratio)))
    expected, _, _ = letterbox(img, 64, scaleup=False)
    assert np.array_equal(image.numpy(), expected.transpose(2, 0, 1)[::-1])
    assert labels.shape == (len(dataset.labels[1]), 6) and (labels[:, 0] == 0).all()
    assert ((labels[:, 2:] >= 0) & (labels[:, 2:] <= 1)).all()


def test_the_worker_count_is_computed_from_its_argument_and_passed_explicitly(
    tmp_path: Path,
) -> None:
    options = {"n": 2, "img_size": 32, "min_size": 40, "max_size": 48, "root": str(tmp_path)}
    assert yolo_files.make_loader(batch_size=1, num_workers=2, **options).num_workers == 0
    many = yolo_files.make_loader(batch_size=4, num_workers=64, **options)
    assert many.num_workers == min(os.cpu_count() or 1, 4)
    assert yolo_files.make_loader(batch_size=4, num_workers=0, **options).num_workers == 0
    with pytest.raises(ConfigError, match="num_workers must be an integer >= 0"):
        yolo_files.make_loader(num_workers=-1, **options)
    with pytest.raises(ConfigError, match="unknown hyperparameter"):
        yolo_files.make_dataset(n=1, hyp={"mosaic": 1.0}, root=str(tmp_path))


def test_the_same_seed_gives_the_same_batches(tmp_path: Path) -> None:
    def first(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
        loader = yolo_files.make_loader(batch_size=4, n=4, seed=seed, img_size=48, min_size=40,
                                        max_size=64, root=str(tmp_path))  # fmt: skip
        return next(iter(loader))

    a, b = first(3), first(3)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert a[0].shape == (4, 3, 48, 48) and set(a[1][:, 0].tolist()) <= {0, 1, 2, 3}
    assert not torch.equal(a[0], first(4)[0])

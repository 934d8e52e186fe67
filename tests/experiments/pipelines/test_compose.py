"""The Compose recipe: decode, BGR to RGB, augment to a normalized CHW crop."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import codedag.experiments.pipelines.compose as compose
from codedag.errors import ConfigError
from codedag.experiments.pipelines.synthetic import SyntheticImage
from codedag.experiments.pipelines.transforms import Compose, RandomCrop, Resize


def test_the_recipe_resizes_with_a_margin_before_the_crop() -> None:
    recipe = compose.train_transforms(img_size=100, resize_margin=1.2)
    assert isinstance(recipe, Compose)
    assert isinstance(recipe.transforms[0], Resize) and isinstance(recipe.transforms[1], RandomCrop)
    image = np.zeros((50, 70, 3), np.uint8)
    random.seed(0)
    np.random.seed(0)
    out = recipe(image)
    assert isinstance(out, torch.Tensor) and out.shape == (3, 100, 100)
    assert out.dtype == torch.float32


def test_the_dataset_decodes_rgb_for_its_transform() -> None:
    seen: list[np.ndarray] = []
    dataset = compose.make_dataset(n=2, img_size=32, min_size=40, max_size=48)
    dataset.transform = lambda image: seen.append(image) or image.shape
    shape, label = dataset[1]
    assert len(dataset) == 2 and label == dataset.samples[1].label
    assert seen[0].dtype == np.uint8 and shape == seen[0].shape and shape[2] == 3


def test_an_undecodable_sample_names_its_index() -> None:
    broken = SyntheticImage(b"junk", 0, np.zeros((0, 5), np.float32), 1, 1)
    with pytest.raises(ValueError, match="sample 0 is not a decodable image"):
        compose.ComposeDataset([broken], lambda image: image)[0]


def test_the_loader_batches_crops_and_labels() -> None:
    loader = compose.make_loader(batch_size=2, n=2, shuffle=False, img_size=24, min_size=32,
                                 max_size=40)  # fmt: skip
    images, labels = next(iter(loader))
    assert images.shape == (2, 3, 24, 24) and labels.dtype == torch.int64


def test_bad_sizes_and_options_are_refused() -> None:
    with pytest.raises(ConfigError, match="img_size must be a positive integer"):
        compose.make_dataset(n=1, img_size=0)
    with pytest.raises(ConfigError, match="unknown option"):
        compose.make_loader(n=1, colour=True)

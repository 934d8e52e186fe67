"""The PIL recipe: JPEG files written once, opened, resized, cropped, flipped, normalized."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import codedag.experiments.pipelines.pil_recipe as pil_recipe
from codedag.errors import ConfigError


def test_files_are_written_once_and_kept(tmp_path: Path) -> None:
    paths = pil_recipe.write_files(tmp_path, 2, seed=1, min_size=40, max_size=48)
    assert [p.name for p in paths] == ["1-00000-40-48.jpg", "1-00001-40-48.jpg"]
    with Image.open(paths[0]) as image:
        assert image.format == "JPEG" and 40 <= min(image.size) <= 48
    stamp = paths[0].stat().st_mtime_ns
    assert pil_recipe.write_files(tmp_path, 2, 1, 40, 48) == paths
    assert paths[0].stat().st_mtime_ns == stamp


def test_samples_are_normalized_crops_drawn_from_torch(tmp_path: Path) -> None:
    dataset = pil_recipe.make_dataset(n=5, resize=40, crop=32, min_size=40, max_size=48,
                                      root=str(tmp_path))  # fmt: skip
    torch.manual_seed(0)
    image, label = dataset[4]
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32 and label == 0
    torch.manual_seed(0)
    assert torch.equal(dataset[4][0], image)
    # a white pixel normalizes to (1 - mean) / std
    assert float(image.max()) <= float(((1 - pil_recipe.MEAN) / pil_recipe.STD).max()) + 1e-5


def test_the_crop_is_at_most_the_resized_side(tmp_path: Path) -> None:
    paths = pil_recipe.write_files(tmp_path, 1, 0, 40, 48)
    dataset = pil_recipe.PilRecipeDataset(paths, resize=20, crop=64)
    assert dataset.crop == 20
    assert dataset[0][0].shape == (3, 20, 20)
    with pytest.raises(ConfigError, match="crop must be a positive integer"):
        pil_recipe.PilRecipeDataset(paths, crop=0)


def test_the_loader_batches_crops_and_labels(tmp_path: Path) -> None:
    loader = pil_recipe.make_loader(batch_size=2, n=2, shuffle=False, resize=24, crop=16,
                                    min_size=32, max_size=40, root=str(tmp_path))  # fmt: skip
    images, labels = next(iter(loader))
    assert images.shape == (2, 3, 16, 16) and labels.tolist() == [0, 1]
    assert np.isfinite(images.numpy()).all()

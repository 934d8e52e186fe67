"""The volume pipeline: int16 volumes on disk, windowed, z-scored, cropped and flipped."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

import codedag.experiments.pipelines.volume as volume
from codedag.errors import ConfigError


def test_volumes_are_written_once_as_int16(tmp_path: Path) -> None:
    paths = volume.write_volumes(tmp_path, 2, seed=3, size=8)
    assert [p.name for p in paths] == ["3-0000-8.npy", "3-0001-8.npy"]
    data = np.load(paths[0])
    assert data.shape == (8, 8, 8) and data.dtype == np.int16
    stamp = paths[1].stat().st_mtime_ns
    assert volume.write_volumes(tmp_path, 2, 3, 8) == paths
    assert paths[1].stat().st_mtime_ns == stamp


def test_a_patch_is_windowed_and_normalized(tmp_path: Path) -> None:
    path = tmp_path / "v.npy"
    np.save(path, np.full((6, 6, 6), 5000, np.int16))  # above the window
    dataset = volume.VolumeDataset([path], patch=4)
    patch, label = dataset[0]
    assert patch.shape == (1, 4, 4, 4) and patch.dtype == torch.float32 and label == 0
    expected = (volume.WINDOW[1] - volume.MEAN) / volume.STD
    assert torch.allclose(patch, torch.full_like(patch, expected))


def test_crop_and_flips_follow_numpys_global_generator(tmp_path: Path) -> None:
    path = tmp_path / "ramp.npy"
    np.save(path, np.arange(216, dtype=np.int16).reshape(6, 6, 6))
    dataset = volume.VolumeDataset([path], patch=3)
    np.random.seed(1)
    first = dataset[0][0]
    np.random.seed(1)
    assert torch.equal(dataset[0][0], first)
    raw = (np.arange(216, dtype=np.float32).reshape(6, 6, 6) - volume.MEAN) / volume.STD
    values = set(np.round(first.numpy().ravel(), 5))
    assert values <= set(np.round(raw.ravel(), 5))  # only voxels of the volume, moved


def test_the_patch_is_at_most_the_volume_and_sizes_are_checked(tmp_path: Path) -> None:
    dataset = volume.make_dataset(n=1, size=6, patch=10, root=str(tmp_path))
    assert dataset.patch == 6
    with pytest.raises(ConfigError, match="size must be a positive integer"):
        volume.make_dataset(n=1, size=0, root=str(tmp_path))


def test_the_loader_batches_patches(tmp_path: Path) -> None:
    loader = volume.make_loader(batch_size=2, n=2, shuffle=False, size=8, patch=4,
                                root=str(tmp_path))  # fmt: skip
    patches, labels = next(iter(loader))
    assert patches.shape == (2, 1, 4, 4, 4) and labels.tolist() == [0, 1]

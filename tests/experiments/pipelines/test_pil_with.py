"""The PIL pipeline written as Pillow's docs recommend: `with Image.open`, NumPy, a random flip."""

from __future__ import annotations

import random
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

import codedag.experiments.pipelines.pil_with as pil_with
from codedag.errors import ConfigError


def _expected(path: Path, size: int, flipped: bool) -> np.ndarray:
    with Image.open(path) as im:
        x = np.asarray(im.convert("RGB").resize((size, size)), dtype=np.float32)
    if flipped:
        x = x[:, ::-1]
    return ((x / 255.0 - pil_with.MEAN) / pil_with.STD).transpose(2, 0, 1)


@pytest.mark.parametrize("draw", [0.1, 0.9])
def test_a_sample_is_the_resized_image_flipped_when_random_draws_below_half(
    tmp_path: Path, draw: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = pil_with.make_dataset(n=3, size=24, min_size=40, max_size=60, root=str(tmp_path))
    monkeypatch.setattr(random, "random", lambda: draw)
    image, label = dataset[2]
    assert image.shape == (3, 24, 24) and image.dtype == torch.float32 and label == 2
    assert np.allclose(image.numpy(), _expected(Path(dataset.paths[2]), 24, draw < 0.5), atol=1e-6)


def test_the_same_seed_gives_the_same_batches_and_files_are_kept(tmp_path: Path) -> None:
    def first_batch(seed: int) -> torch.Tensor:
        loader = pil_with.make_loader(batch_size=4, n=4, seed=seed, size=16, min_size=40,
                                      max_size=48, root=str(tmp_path))  # fmt: skip
        return next(iter(loader))[0]

    a = first_batch(1)
    stamps = [p.stat().st_mtime_ns for p in sorted(tmp_path.iterdir())]
    assert len(stamps) == 4
    assert torch.equal(a, first_batch(1))
    assert [p.stat().st_mtime_ns for p in sorted(tmp_path.iterdir())] == stamps
    assert a.shape == (4, 3, 16, 16)


def test_sizes_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="size must be a positive integer"):
        pil_with.make_dataset(n=1, size=0, root=str(tmp_path))

"""Audio classification front end: fixed-length crops, librosa log-mel spectrograms, an image.

Each clip (synthetic, of varied length) is randomly cropped or zero-padded to ``duration_s`` by
slicing (:func:`crop_or_pad`), scaled by a random gain, turned into a mel power spectrogram
with ``librosa.feature.melspectrogram`` and into decibels with ``librosa.power_to_db`` (relative
to the clip's maximum), min-max normalized to [0, 1] with operators, and resized with
``cv2.resize`` to a fixed ``out_height`` x ``out_width`` image, as BirdCLEF-style notebooks feed
image models. Needs librosa (``pip install 'codedag[audio]'``).

A batch is ``(spectrograms, labels)``: float32 ``(B, 1, out_height, out_width)`` and int64
``(B,)``.
"""

from __future__ import annotations

import random
from typing import Any

import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.errors import ConfigError
from codedag.experiments.pipelines.loaders import check_sizes, loader_from_factory
from codedag.experiments.pipelines.synthetic import SyntheticClip, make_clips

DESCRIPTION = (
    "audio classification: random crop/zero-pad to a fixed duration, random gain, librosa "
    "mel spectrogram + power_to_db, min-max normalize, cv2.resize to a fixed image"
)
CALLS = (
    "numpy.zeros",
    "librosa.feature.melspectrogram",
    "librosa.power_to_db",
    "cv2.resize",
    "torch.from_numpy",
)


def require_librosa() -> Any:
    """The librosa module, or a :class:`ConfigError` saying how to install it."""
    try:
        import librosa
    except ImportError as error:
        raise ConfigError(
            "the mel pipeline needs librosa, which is not installed: pip install 'codedag[audio]'"
        ) from error
    return librosa


def crop_or_pad(y: np.ndarray, length: int) -> np.ndarray:
    """A random ``length``-sample window of ``y``, or ``y`` at a random offset in zeros."""
    if len(y) >= length:
        start = np.random.randint(0, len(y) - length + 1)
        return y[start : start + length]
    padded = np.zeros(length, dtype=y.dtype)
    offset = np.random.randint(0, length - len(y) + 1)
    padded[offset : offset + len(y)] = y
    return padded


class MelDataset(Dataset):
    """Waveforms to normalized log-mel images of a fixed size, with their labels."""

    def __init__(
        self,
        clips: list[SyntheticClip],
        sample_rate: int = 32000,
        duration_s: float = 5.0,
        n_fft: int = 2048,
        hop_length: int = 512,
        n_mels: int = 128,
        out_height: int = 128,
        out_width: int = 256,
    ) -> None:
        check_sizes(
            sample_rate=sample_rate,
            n_fft=n_fft,
            hop_length=hop_length,
            n_mels=n_mels,
            out_height=out_height,
            out_width=out_width,
        )
        if duration_s <= 0:
            raise ConfigError(f"duration_s must be > 0, got {duration_s!r}")
        self.clips = clips
        self.sample_rate = sample_rate
        self.length = round(duration_s * sample_rate)
        self.n_fft = n_fft
        self.hop_length = hop_length
        self.n_mels = n_mels
        self.out_size = (out_width, out_height)

    def __len__(self) -> int:
        return len(self.clips)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        librosa = require_librosa()
        clip = self.clips[index]
        y = crop_or_pad(clip.waveform, self.length)
        y = y * random.uniform(0.8, 1.2)
        mel = librosa.feature.melspectrogram(
            y=y,
            sr=self.sample_rate,
            n_fft=self.n_fft,
            hop_length=self.hop_length,
            n_mels=self.n_mels,
            fmin=20,
            fmax=self.sample_rate // 2,
        )
        db = librosa.power_to_db(mel, ref=np.max)
        db = (db - db.min()) / (db.max() - db.min() + 1e-6)
        image = cv2.resize(db, self.out_size, interpolation=cv2.INTER_LINEAR)
        x = image[np.newaxis].astype(np.float32)
        return torch.from_numpy(x), clip.label


def make_dataset(
    n: int = 64,
    seed: int = 0,
    sample_rate: int = 32000,
    duration_s: float = 5.0,
    min_seconds: float = 2.0,
    max_seconds: float = 7.0,
    n_fft: int = 2048,
    hop_length: int = 512,
    n_mels: int = 128,
    out_height: int = 128,
    out_width: int = 256,
) -> MelDataset:
    """``n`` clips of ``min_seconds``..``max_seconds``, cropped or padded to ``duration_s``."""
    require_librosa()
    clips = make_clips(
        n, seed=seed, sample_rate=sample_rate, min_seconds=min_seconds, max_seconds=max_seconds
    )
    return MelDataset(
        clips,
        sample_rate=sample_rate,
        duration_s=duration_s,
        n_fft=n_fft,
        hop_length=hop_length,
        n_mels=n_mels,
        out_height=out_height,
        out_width=out_width,
    )


def make_loader(
    batch_size: int = 16,
    num_workers: int = 0,
    seed: int = 0,
    *,
    n: int = 64,
    shuffle: bool = True,
    **options: Any,
) -> DataLoader:
    """A DataLoader over :func:`make_dataset`; ``options`` go to it or to the DataLoader.

    Dataset options: ``sample_rate``, ``duration_s``, ``min_seconds``, ``max_seconds``,
    ``n_fft``, ``hop_length``, ``n_mels``, ``out_height``, ``out_width``. Loader options:
    ``drop_last``, ``pin_memory``, ``persistent_workers``, ``prefetch_factor``.
    """
    return loader_from_factory(
        make_dataset, batch_size, num_workers, seed, n=n, shuffle=shuffle, options=options
    )

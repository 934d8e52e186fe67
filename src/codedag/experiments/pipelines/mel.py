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
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import torch
from torch.utils.data import Dataset

from codedag.errors import ConfigError
from codedag.experiments.pipelines.loaders import check_sizes, loader_maker
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


def missing_audio_package(pipeline: str, package: str) -> ConfigError:
    """The error of an audio pipeline whose ``package`` is not installed: how to install it."""
    return ConfigError(
        f"the {pipeline} pipeline needs {package}, which is not installed: "
        "pip install 'codedag[audio]'"
    )


def require_librosa(pipeline: str = "mel") -> Any:
    """The librosa module, or a :class:`ConfigError` saying how to install it."""
    try:
        import librosa
    except ImportError as error:
        raise missing_audio_package(pipeline, "librosa") from error
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


@dataclass(frozen=True)
class MelSettings:
    """A log-mel front end's settings.

    Args:
        sample_rate: the clips' sample rate.
        duration_s: the clips' duration.
        n_fft, hop_length, n_mels: the mel spectrogram's settings.
    """

    sample_rate: int
    duration_s: float
    n_fft: int
    hop_length: int
    n_mels: int


class LogMelFrontEnd(Dataset):
    """Clips of a fixed duration to min-max normalized log-mel spectrograms (librosa's mel power
    spectrogram in decibels relative to the clip's maximum, scaled to 0..1).

    Args:
        settings: the sample rate, the clips' duration (``length`` samples) and the mel
            spectrogram's settings.
        sizes: further sizes of the data set, checked positive with them.
    """

    def __init__(self, settings: MelSettings, **sizes: int) -> None:
        sample_rate, duration_s = settings.sample_rate, settings.duration_s
        check_sizes(
            sample_rate=sample_rate,
            n_fft=settings.n_fft,
            hop_length=settings.hop_length,
            n_mels=settings.n_mels,
            **sizes,
        )
        if duration_s <= 0:
            raise ConfigError(f"duration_s must be > 0, got {duration_s!r}")
        self.sample_rate = sample_rate
        self.length = round(duration_s * sample_rate)
        self.n_fft = settings.n_fft
        self.hop_length = settings.hop_length
        self.n_mels = settings.n_mels

    def log_mel(self, librosa: Any, y: np.ndarray, sr: int, **mel: Any) -> np.ndarray:
        """The normalized log-mel spectrogram of ``y`` (``mel``: more melspectrogram settings)."""
        mel_power = librosa.feature.melspectrogram(
            y=y, sr=sr, n_fft=self.n_fft, hop_length=self.hop_length, n_mels=self.n_mels, **mel
        )
        db = librosa.power_to_db(mel_power, ref=np.max)
        return (db - db.min()) / (db.max() - db.min() + 1e-6)


class MelDataset(LogMelFrontEnd):
    """Waveforms to normalized log-mel images of a fixed size, with their labels."""

    def __init__(
        self, clips: list[SyntheticClip], settings: MelSettings, out_height: int, out_width: int
    ) -> None:
        super().__init__(settings, out_height=out_height, out_width=out_width)
        self.clips = clips
        self.out_size = (out_width, out_height)

    def __len__(self) -> int:
        return len(self.clips)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        librosa = require_librosa()
        clip = self.clips[index]
        y = crop_or_pad(clip.waveform, self.length)
        y = y * random.uniform(0.8, 1.2)
        db = self.log_mel(librosa, y, self.sample_rate, fmin=20, fmax=self.sample_rate // 2)
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
    settings = MelSettings(sample_rate, duration_s, n_fft, hop_length, n_mels)
    return MelDataset(clips, settings, out_height, out_width)


make_loader = loader_maker(make_dataset)

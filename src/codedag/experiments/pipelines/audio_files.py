"""An audio competition pipeline: WAV files on disk, resampled on load, log-mel spectrograms.

Each sample is a WAV file at ``file_sample_rate`` (32 kHz by default; synthetic clips of varied
length written once into a folder with soundfile), loaded with ``librosa.load(path,
sr=sample_rate)`` (resampled to 16 kHz by default), zero-padded with ``np.pad`` to at least
``duration_s``, randomly cropped to it (``np.random.randint``), turned into a mel power
spectrogram with ``librosa.feature.melspectrogram`` and into decibels with
``librosa.power_to_db`` (relative to the clip's maximum), min-max normalized to 0..1. Needs
librosa and soundfile (``pip install 'codedag[audio]'``).

A batch is ``(spectrograms, labels)``: float32 ``(B, 1, n_mels, 1 + length // hop_length)``
(``length``: ``duration_s`` seconds at ``sample_rate``) and int64 ``(B,)``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

import codedag.experiments.pipelines.mel as mel
from codedag.experiments.pipelines.loaders import check_sizes, data_folder, loader_maker
from codedag.experiments.pipelines.synthetic import make_clips
from codedag.util.io import atomic_write_with

DESCRIPTION = (
    "audio competition pipeline: WAV files at 32 kHz, librosa.load resampling to 16 kHz, np.pad "
    "to a fixed length, random crop, librosa mel spectrogram + power_to_db, normalize to 0..1"
)
CALLS = (
    "librosa.load",
    "numpy.pad",
    "librosa.feature.melspectrogram",
    "librosa.power_to_db",
    "torch.from_numpy",
)


def require_librosa() -> Any:
    """The librosa module, or a :class:`ConfigError` saying how to install it."""
    return mel.require_librosa("audio_files")


def write_clips(
    folder: Path,
    n: int,
    seed: int,
    sample_rate: int,
    min_seconds: float,
    max_seconds: float,
) -> list[Path]:
    """Write ``n`` synthetic WAV clips into ``folder`` (kept when already there); their paths.

    Each file is written under a temporary name and renamed, so a reader never sees half a file.
    """
    try:
        import soundfile
    except ImportError as error:
        raise mel.missing_audio_package("audio_files", "soundfile") from error
    folder.mkdir(parents=True, exist_ok=True)
    stem = f"{seed}-{sample_rate}-{min_seconds:g}-{max_seconds:g}"
    paths = [folder / f"{stem}-{i:05d}.wav" for i in range(n)]
    if all(p.exists() for p in paths):
        return paths
    clips = make_clips(
        n, seed=seed, sample_rate=sample_rate, min_seconds=min_seconds, max_seconds=max_seconds
    )
    for path, clip in zip(paths, clips):
        waveform = clip.waveform

        def encode(draft: Path, waveform: np.ndarray = waveform) -> None:
            soundfile.write(draft, waveform, sample_rate, format="WAV", subtype="PCM_16")

        atomic_write_with(path, encode)  # the folder may be shared: never written through a link
    return paths


class AudioFilesDataset(mel.LogMelFrontEnd):
    """WAV files to normalized log-mel spectrograms of a fixed duration, with their labels."""

    def __init__(self, paths: list[Path], settings: mel.MelSettings) -> None:
        super().__init__(settings)
        self.paths = [str(p) for p in paths]

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        librosa = require_librosa()
        y, sr = librosa.load(self.paths[index], sr=self.sample_rate)
        y = np.pad(y, (0, max(0, self.length - len(y))))
        start = np.random.randint(0, len(y) - self.length + 1)
        y = y[start : start + self.length]
        db = self.log_mel(librosa, y, sr)
        return torch.from_numpy(db[np.newaxis].astype(np.float32)), index % 4


def make_dataset(
    n: int = 64,
    seed: int = 0,
    file_sample_rate: int = 32000,
    sample_rate: int = 16000,
    duration_s: float = 5.0,
    min_seconds: float = 2.0,
    max_seconds: float = 7.0,
    n_fft: int = 1024,
    hop_length: int = 320,
    n_mels: int = 64,
    root: str | None = None,
) -> AudioFilesDataset:
    """``n`` WAV clips of ``min_seconds``..``max_seconds`` at ``file_sample_rate`` in ``root``
    (default: a folder under the system's temporary folder), loaded at ``sample_rate``."""
    require_librosa()
    check_sizes(n=n, file_sample_rate=file_sample_rate)
    folder = data_folder(root, "codedag-audio-files")
    paths = write_clips(folder, n, seed, file_sample_rate, min_seconds, max_seconds)
    settings = mel.MelSettings(sample_rate, duration_s, n_fft, hop_length, n_mels)
    return AudioFilesDataset(paths, settings)


make_loader = loader_maker(make_dataset)

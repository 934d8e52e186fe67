"""The audio competition pipeline: 32 kHz WAV files, resampled on load, padded, cropped, log-mel."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip("librosa")
soundfile = pytest.importorskip("soundfile")

import codedag.experiments.pipelines.audio_files as audio_files  # noqa: E402
from codedag.errors import ConfigError  # noqa: E402

SMALL = {"n_fft": 256, "hop_length": 64, "n_mels": 16}


def test_clips_are_written_once_at_the_file_rate(tmp_path: Path) -> None:
    paths = audio_files.write_clips(tmp_path, 2, seed=1, sample_rate=8000, min_seconds=0.5,
                                    max_seconds=1.0)  # fmt: skip
    info = soundfile.info(str(paths[0]))
    assert info.samplerate == 8000 and info.channels == 1 and 0.5 <= info.duration <= 1.0
    stamp = paths[1].stat().st_mtime_ns
    assert audio_files.write_clips(tmp_path, 2, 1, 8000, 0.5, 1.0) == paths
    assert paths[1].stat().st_mtime_ns == stamp
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths)


def test_short_clips_are_padded_and_every_sample_is_a_normalized_spectrogram(
    tmp_path: Path,
) -> None:
    dataset = audio_files.make_dataset(n=2, file_sample_rate=8000, sample_rate=4000,
                                       duration_s=2.0, min_seconds=0.5, max_seconds=1.0,
                                       root=str(tmp_path), **SMALL)  # fmt: skip
    np.random.seed(0)
    spectrogram, label = dataset[1]
    assert spectrogram.shape == (1, 16, 1 + 8000 // 64) and spectrogram.dtype == torch.float32
    assert label == 1
    assert float(spectrogram.min()) == 0.0 and 0.99 <= float(spectrogram.max()) <= 1.0
    # padded with zeros to 2 s: the last frames are silence, the floor of the normalized dB
    assert float(spectrogram[0, :, -4:].max()) < 0.05
    np.random.seed(0)
    assert torch.equal(dataset[1][0], spectrogram)


def test_long_clips_are_cropped_at_a_random_offset(tmp_path: Path) -> None:
    dataset = audio_files.make_dataset(n=1, file_sample_rate=8000, sample_rate=4000,
                                       duration_s=0.25, min_seconds=1.5, max_seconds=1.5,
                                       root=str(tmp_path), **SMALL)  # fmt: skip
    np.random.seed(0)
    first = dataset[0][0]
    np.random.seed(1)
    second = dataset[0][0]
    assert first.shape == second.shape == (1, 16, 1 + 1000 // 64)
    assert not torch.equal(first, second)


def test_durations_are_checked(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="duration_s must be > 0"):
        audio_files.make_dataset(n=1, duration_s=0, root=str(tmp_path), min_seconds=0.1,
                                 max_seconds=0.2)  # fmt: skip

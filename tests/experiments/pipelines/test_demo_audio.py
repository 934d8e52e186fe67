"""The demo's audio pipeline behind the pipelines' factory: checks, dataset, loader."""

from __future__ import annotations

import pytest
import torch

import codedag.experiments.pipelines.demo_audio as demo_audio
from codedag.errors import ConfigError
from codedag.experiments.demo_data import AudioDemoDataset

pytest.importorskip("librosa")


def test_the_dataset_takes_the_factory_settings() -> None:
    dataset = demo_audio.make_dataset(n=3, sample_rate=8000, seconds=0.5, n_fft=256,
                                      hop_length=128, n_mels=8, num_classes=2)  # fmt: skip
    assert isinstance(dataset, AudioDemoDataset)
    assert len(dataset) == 3 and [s.label for s in dataset.samples] == [0, 1, 0]
    assert dataset.samples[0].waveform.shape == (4000,)
    assert (dataset.n_fft, dataset.hop_length, dataset.n_mels) == (256, 128, 8)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"seconds": 0.4}, "seconds must be >= 0.5"),
        ({"n_mels": 0}, "n_mels must be a positive integer"),
        ({"hop_length": 1.5}, "hop_length must be a positive integer"),
    ],
)
def test_bad_settings_are_refused(options: dict[str, float], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        demo_audio.make_dataset(n=1, **options)  # type: ignore[arg-type]


def test_the_loader_batches_one_channel_spectrograms() -> None:
    loader = demo_audio.make_loader(batch_size=2, n=2, shuffle=False, sample_rate=8000,
                                    seconds=0.5, n_fft=256, hop_length=128, n_mels=8)  # fmt: skip
    spectrograms, labels = next(iter(loader))
    assert spectrograms.shape == (2, 1, 8, 1 + 4000 // 128)
    assert labels.tolist() == [0, 1] and labels.dtype == torch.int64

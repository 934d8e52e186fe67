"""The demo's audio pipeline (:mod:`codedag.experiments.demo_data`) behind the pipelines' factories.

BirdCLEF-like clips of ``seconds`` seconds (chirps in noise); per sample a librosa mel
spectrogram and ``power_to_db``, scaled with operators. Needs librosa
(``pip install 'codedag[audio]'``). A batch is ``(spectrograms, labels)``: float32
``(B, 1, n_mels, 1 + samples // hop_length)`` and int64 ``(B,)``.
"""

from __future__ import annotations

from codedag.errors import ConfigError
from codedag.experiments.demo_data import AudioDemoDataset, make_audio_samples
from codedag.experiments.pipelines.loaders import check_sizes, loader_maker
from codedag.experiments.pipelines.mel import require_librosa

DESCRIPTION = (
    "the demo's audio classification pipeline: librosa mel spectrogram + power_to_db of "
    "fixed-length clips, scaled with operators"
)
CALLS = (
    "librosa.feature.melspectrogram",
    "librosa.power_to_db",
    "numpy.ascontiguousarray",
    "torch.from_numpy",
)


def make_dataset(
    n: int = 64,
    seed: int = 0,
    sample_rate: int = 32000,
    seconds: float = 5.0,
    num_classes: int = 4,
    n_fft: int = 2048,
    hop_length: int = 512,
    n_mels: int = 64,
) -> AudioDemoDataset:
    """The demo's ``n`` clips of ``seconds`` seconds and its log-mel preprocessing."""
    require_librosa()
    check_sizes(n=n, sample_rate=sample_rate, num_classes=num_classes)
    if seconds < 0.5:
        raise ConfigError(f"seconds must be >= 0.5 (each clip holds 0.3 s chirps), got {seconds}")
    samples = make_audio_samples(
        n, num_classes=num_classes, sample_rate=sample_rate, seconds=seconds, seed=seed
    )
    return AudioDemoDataset(
        samples, sample_rate=sample_rate, n_fft=n_fft, hop_length=hop_length, n_mels=n_mels
    )


make_loader = loader_maker(make_dataset)

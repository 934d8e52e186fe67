"""Synthetic Kaggle-like data for ``codedag demo``: nothing is downloaded.

Image task: colored shapes on noise, one shape per class, encoded in memory as PNG or JPEG bytes;
the Dataset decodes and preprocesses each sample with cv2 and NumPy in ``__getitem__`` (resize,
color conversion, random flip and affine, normalize, HWC to CHW), as a competition notebook does.

Audio task (BirdCLEF-like): 5 s clips of class-specific chirps in noise; the Dataset computes a
log-mel spectrogram with librosa per sample.

Random augmentation draws come from a generator seeded with ``seed + index``, so a sample is the
same whichever device runs its preprocessing: that is what lets the demo check that migrated
batches equal the baseline's.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import nn
from torch.utils.data import Dataset

IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


@dataclass(eq=False, repr=False)
class SampleDataset(Dataset):
    """A Dataset of in-memory ``samples``, one item each; a subclass adds its settings as fields
    and its ``__getitem__``. A dataclass: ``eq=False`` compares and hashes it by identity, as any
    Dataset, ``repr=False`` spares a repr of every sample."""

    samples: list[Any]

    def __len__(self) -> int:
        return len(self.samples)


@dataclass(frozen=True)
class ImageSample:
    """One encoded image and its label."""

    data: bytes
    label: int


def make_image_samples(
    count: int,
    num_classes: int = 4,
    source_size: int = 256,
    image_format: str = "png",
    seed: int = 0,
) -> list[ImageSample]:
    """Draw ``count`` encoded images: class k is a shape of class-specific color and size."""
    if image_format not in ("png", "jpg"):
        from codedag.errors import ConfigError

        raise ConfigError(f"image_format must be 'png' or 'jpg', got {image_format!r}")
    return list(_image_samples(count, num_classes, source_size, image_format, seed))


# Drawn once per argument set (benchmarks build a loader per timed round; PNG encoding costs more
# than the round), as codedag.experiments.pipelines.synthetic.make_images is.
@functools.lru_cache(maxsize=4)
def _image_samples(
    count: int, num_classes: int, source_size: int, image_format: str, seed: int
) -> tuple[ImageSample, ...]:
    import cv2

    rng = np.random.default_rng(seed)
    samples = []
    for index in range(count):
        label = index % num_classes
        image = rng.integers(0, 70, size=(source_size, source_size, 3), dtype=np.uint8)
        center = tuple(int(c) for c in rng.integers(source_size // 3, 2 * source_size // 3, size=2))
        radius = int(source_size * (0.12 + 0.05 * label))
        color = tuple(int(c) for c in ((60 * label) % 256, 230 - 45 * label, 80 + 40 * label))
        if label % 2 == 0:
            cv2.circle(image, center, radius, color, -1)
        else:
            corner = (center[0] + radius, center[1] + radius)
            cv2.rectangle(image, (center[0] - radius, center[1] - radius), corner, color, -1)
        ok, encoded = cv2.imencode(f".{image_format}", image)
        if not ok:  # pragma: no cover - cv2 encodes uint8 images
            raise RuntimeError("cv2.imencode failed")
        samples.append(ImageSample(encoded.tobytes(), label))
    return tuple(samples)


@dataclass(eq=False, repr=False)
class ImageDemoDataset(SampleDataset):
    """Per-sample cv2/NumPy preprocessing of encoded images (:class:`ImageSample`), returning
    (CHW float32, label)."""

    out_size: int = 128
    seed: int = 0

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import cv2

        sample = self.samples[index]
        image = cv2.imdecode(np.frombuffer(sample.data, dtype=np.uint8), cv2.IMREAD_COLOR)
        if image is None:
            raise ValueError(f"sample {index}: its bytes do not decode to an image")
        image = cv2.resize(image, (self.out_size, self.out_size), interpolation=cv2.INTER_LINEAR)
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        rng = np.random.default_rng(self.seed + index)
        if rng.random() < 0.5:
            image = cv2.flip(image, 1)
        angle = float(rng.uniform(-15.0, 15.0))
        scale = float(rng.uniform(0.9, 1.1))
        center = (self.out_size / 2.0, self.out_size / 2.0)
        matrix = cv2.getRotationMatrix2D(center, angle, scale)
        image = cv2.warpAffine(
            image,
            matrix,
            (self.out_size, self.out_size),
            flags=cv2.INTER_LINEAR,
            borderMode=cv2.BORDER_REFLECT_101,
        )
        image = image.astype(np.float32) / 255.0
        image = (image - IMAGENET_MEAN) / IMAGENET_STD
        image = np.transpose(image, (2, 0, 1))
        return torch.from_numpy(np.ascontiguousarray(image, dtype=np.float32)), sample.label


@dataclass(frozen=True)
class AudioSample:
    """One waveform (float32, mono) and its label."""

    waveform: np.ndarray
    label: int


def make_audio_samples(
    count: int, num_classes: int = 4, sample_rate: int = 32000, seconds: float = 5.0, seed: int = 0
) -> list[AudioSample]:
    """BirdCLEF-like clips: class k chirps around a class-specific pitch, in background noise."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(sample_rate * seconds), dtype=np.float32) / sample_rate
    samples = []
    for index in range(count):
        label = index % num_classes
        base_hz = 1500.0 + 900.0 * label
        clip = 0.05 * rng.standard_normal(t.size).astype(np.float32)
        for start in rng.uniform(0.0, seconds - 0.4, size=4):
            mask = (t >= start) & (t < start + 0.3)
            sweep = base_hz + 1200.0 * (t[mask] - start)
            envelope = np.sin(np.pi * (t[mask] - start) / 0.3)
            clip[mask] += 0.4 * envelope * np.sin(2 * np.pi * sweep * (t[mask] - start))
        samples.append(AudioSample(clip.astype(np.float32), label))
    return samples


@dataclass(eq=False, repr=False)
class AudioDemoDataset(SampleDataset):
    """Per-sample log-mel spectrogram of clips (:class:`AudioSample`) with librosa, returning
    (1, n_mels, frames) and the label."""

    sample_rate: int = 32000
    n_fft: int = 2048
    hop_length: int = 512
    n_mels: int = 64

    def __post_init__(self) -> None:
        from codedag.experiments.pipelines.loaders import check_sizes

        check_sizes(
            sample_rate=self.sample_rate,
            n_fft=self.n_fft,
            hop_length=self.hop_length,
            n_mels=self.n_mels,
        )

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        import librosa

        sample = self.samples[index]
        mel = librosa.feature.melspectrogram(
            y=sample.waveform,
            sr=self.sample_rate,
            n_fft=self.n_fft,
            hop_length=self.hop_length,
            n_mels=self.n_mels,
        )
        db = librosa.power_to_db(mel, ref=1.0, top_db=80.0)
        db = (db + 40.0) / 40.0
        return torch.from_numpy(np.ascontiguousarray(db[None], dtype=np.float32)), sample.label


class SmallCNN(nn.Module):
    """A small CNN for either task (``in_channels`` 3 for images, 1 for spectrograms)."""

    def __init__(self, in_channels: int = 3, num_classes: int = 4) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(in_channels, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).flatten(1))


def describe(dataset: Any) -> str:
    """One line for logs: what the demo dataset does per sample."""
    if isinstance(dataset, AudioDemoDataset):
        return (
            f"{len(dataset)} clips, librosa melspectrogram (n_fft={dataset.n_fft}, "
            f"hop={dataset.hop_length}, n_mels={dataset.n_mels}) + power_to_db per sample"
        )
    return (
        f"{len(dataset)} encoded images, cv2 imdecode/resize/cvtColor/flip/warpAffine + "
        f"NumPy normalize and HWC->CHW per sample, {dataset.out_size}x{dataset.out_size} output"
    )

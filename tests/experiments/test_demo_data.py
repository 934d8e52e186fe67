"""The demo's synthetic data: encoded images, chirp clips, their datasets and the model."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
import torch

import codedag.experiments.demo_data as demo_data
from codedag.errors import ConfigError


def test_images_are_encoded_with_labels_in_turn_and_reproducible() -> None:
    samples = demo_data.make_image_samples(5, num_classes=4, source_size=48, seed=3)
    assert [s.label for s in samples] == [0, 1, 2, 3, 0]
    assert samples[0].data[:8] == b"\x89PNG\r\n\x1a\n"
    shared = demo_data.make_image_samples(5, num_classes=4, source_size=48, seed=3)
    assert shared[0] is samples[0] and shared is not samples  # drawn once, each caller's own list
    demo_data._image_samples.cache_clear()
    again = demo_data.make_image_samples(5, num_classes=4, source_size=48, seed=3)
    assert again[0] is not samples[0]
    assert [s.data for s in again] == [s.data for s in samples]
    decoded = cv2.imdecode(np.frombuffer(samples[1].data, np.uint8), cv2.IMREAD_COLOR)
    assert decoded.shape == (48, 48, 3)
    jpg = demo_data.make_image_samples(1, source_size=48, image_format="jpg")
    assert jpg[0].data[:2] == b"\xff\xd8"


def test_an_unknown_image_format_is_refused() -> None:
    with pytest.raises(ConfigError, match="image_format must be 'png' or 'jpg'"):
        demo_data.make_image_samples(1, image_format="bmp")


def test_image_dataset_gives_normalized_chw_the_same_each_time() -> None:
    dataset = demo_data.ImageDemoDataset(demo_data.make_image_samples(2, source_size=48), 32, 7)
    image, label = dataset[1]
    assert len(dataset) == 2 and label == 1
    assert image.shape == (3, 32, 32) and image.dtype == torch.float32
    assert image.min() < 0 < image.max()  # ImageNet normalization centers the values
    assert torch.equal(dataset[1][0], image)  # draws seeded by index
    assert "2 encoded images" in demo_data.describe(dataset) and "32x32" in demo_data.describe(
        dataset
    )


def test_bytes_that_do_not_decode_are_reported_with_the_index() -> None:
    dataset = demo_data.ImageDemoDataset([demo_data.ImageSample(b"not an image", 0)], 16)
    with pytest.raises(ValueError, match="sample 0"):
        dataset[0]


def test_audio_clips_have_the_requested_length_and_labels() -> None:
    clips = demo_data.make_audio_samples(3, num_classes=2, sample_rate=8000, seconds=0.5, seed=1)
    assert [c.label for c in clips] == [0, 1, 0]
    assert clips[0].waveform.shape == (4000,) and clips[0].waveform.dtype == np.float32
    assert not np.array_equal(clips[0].waveform, clips[2].waveform)


def test_audio_dataset_gives_a_one_channel_log_mel() -> None:
    clips = demo_data.make_audio_samples(1, sample_rate=8000, seconds=0.5)
    dataset = demo_data.AudioDemoDataset(
        clips, sample_rate=8000, n_fft=256, hop_length=128, n_mels=16
    )
    mel, label = dataset[0]
    assert label == 0
    assert mel.shape == (1, 16, 4000 // 128 + 1) and mel.dtype == torch.float32
    assert "n_mels=16" in demo_data.describe(dataset)


def test_the_model_maps_either_input_to_class_scores() -> None:
    images = demo_data.SmallCNN(3, num_classes=5)(torch.zeros(2, 3, 16, 16))
    spectrograms = demo_data.SmallCNN(1, num_classes=4)(torch.zeros(2, 1, 16, 20))
    assert images.shape == (2, 5) and spectrograms.shape == (2, 4)

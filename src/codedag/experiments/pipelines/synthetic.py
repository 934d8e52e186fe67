"""Synthetic data for the example pipelines, generated in memory from a seed (nothing downloaded).

Images: a smooth color gradient with sensor-like noise and one to ``max_objects`` solid objects
(rectangles for even classes, ellipses for odd ones) in distinct cells of a 2x2 grid, so objects
never overlap and the pixel at a box's center always has the object's class color. Heights and
widths vary independently between ``min_size`` and ``max_size`` (a ragged set, as real photos
are), and each image is encoded to JPEG or PNG bytes the Dataset decodes with ``cv2.imdecode``.
Boxes are stored as YOLO label files hold them: ``class, x_center, y_center, width, height``,
normalized to the image size.

Audio: mono float32 clips of varied length, a class-specific harmonic tone with vibrato and
chirps in background noise.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import cv2
import numpy as np

from codedag.errors import ConfigError

IMAGE_FORMATS = ("jpg", "png", "mixed")

# BGR colors per class, far apart so a decoded pixel says which class it belongs to.
CLASS_COLORS_BGR: tuple[tuple[int, int, int], ...] = (
    (40, 40, 230),
    (40, 220, 40),
    (230, 60, 30),
    (30, 220, 230),
    (220, 40, 220),
    (230, 230, 40),
    (250, 250, 250),
    (10, 10, 10),
)


@dataclass(frozen=True)
class SyntheticImage:
    """One encoded image, its class label (the largest object's class) and its boxes.

    ``boxes`` is float32 of shape (k, 5): class, x_center, y_center, width, height, the last four
    normalized to the image size.
    """

    data: bytes
    label: int
    boxes: np.ndarray
    height: int
    width: int


@dataclass(frozen=True)
class SyntheticClip:
    """One mono float32 waveform and its class label."""

    waveform: np.ndarray
    label: int
    sample_rate: int


def _check_positive(**values: int | float) -> None:
    for name, value in values.items():
        if value <= 0:
            raise ConfigError(f"{name} must be > 0, got {value!r}")


def _background(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    ys = np.linspace(0.0, 1.0, height, dtype=np.float32)[:, None, None]
    xs = np.linspace(0.0, 1.0, width, dtype=np.float32)[None, :, None]
    start = rng.uniform(30, 120, size=3).astype(np.float32)
    slope_y = rng.uniform(-40, 40, size=3).astype(np.float32)
    slope_x = rng.uniform(-40, 40, size=3).astype(np.float32)
    noise = rng.normal(0.0, 6.0, size=(height, width, 3)).astype(np.float32)
    image = start + slope_y * ys + slope_x * xs + noise
    return np.clip(image, 0, 255).astype(np.uint8)


def _draw_objects(
    rng: np.random.Generator, image: np.ndarray, num_classes: int, max_objects: int
) -> np.ndarray:
    """Draw non-overlapping objects, one per grid cell; return their normalized boxes."""
    height, width = image.shape[:2]
    cells = rng.permutation(4)[: int(rng.integers(1, max_objects + 1))]
    boxes = []
    for cell in cells:
        cell_x0, cell_y0 = (cell % 2) * width // 2, (cell // 2) * height // 2
        cell_w, cell_h = width // 2, height // 2
        obj_w = int(cell_w * rng.uniform(0.35, 0.85))
        obj_h = int(cell_h * rng.uniform(0.35, 0.85))
        x0 = cell_x0 + int(rng.integers(0, cell_w - obj_w + 1))
        y0 = cell_y0 + int(rng.integers(0, cell_h - obj_h + 1))
        cls = int(rng.integers(0, num_classes))
        color = CLASS_COLORS_BGR[cls % len(CLASS_COLORS_BGR)]
        if cls % 2 == 0:
            cv2.rectangle(image, (x0, y0), (x0 + obj_w - 1, y0 + obj_h - 1), color, -1)
        else:
            center = (x0 + obj_w // 2, y0 + obj_h // 2)
            cv2.ellipse(image, center, (obj_w // 2, obj_h // 2), 0, 0, 360, color, -1)
        boxes.append(
            (
                cls,
                (x0 + obj_w / 2) / width,
                (y0 + obj_h / 2) / height,
                obj_w / width,
                obj_h / height,
            )
        )
    return np.array(boxes, dtype=np.float32)


def make_images(
    n: int,
    seed: int = 0,
    min_size: int = 320,
    max_size: int = 640,
    num_classes: int = 4,
    max_objects: int = 3,
    image_format: str = "jpg",
) -> list[SyntheticImage]:
    """Draw ``n`` encoded images of ragged sizes with their labels and boxes.

    Args:
        n: number of images.
        seed: seed of the generator; the same seed gives the same bytes.
        min_size: smallest height or width in pixels.
        max_size: largest height or width in pixels.
        num_classes: number of object classes (at most 8 distinct colors).
        max_objects: at most this many objects per image (1 to 4).
        image_format: ``"jpg"``, ``"png"`` or ``"mixed"`` (alternating, JPEG first).
    """
    _check_positive(n=n, min_size=min_size, max_size=max_size, num_classes=num_classes)
    if min_size > max_size:
        raise ConfigError(f"min_size must be <= max_size, got {min_size} > {max_size}")
    if min_size < 16:
        raise ConfigError(f"min_size must be >= 16 pixels, got {min_size}")
    if not 1 <= num_classes <= len(CLASS_COLORS_BGR):
        raise ConfigError(f"num_classes must be 1..{len(CLASS_COLORS_BGR)}, got {num_classes}")
    if not 1 <= max_objects <= 4:
        raise ConfigError(f"max_objects must be 1..4, got {max_objects}")
    if image_format not in IMAGE_FORMATS:
        raise ConfigError(f"image_format must be one of {IMAGE_FORMATS}, got {image_format!r}")
    return list(
        _encoded_images(n, seed, min_size, max_size, num_classes, max_objects, image_format)
    )


# Benchmarks build a fresh loader per timed round: drawing and encoding the images again each time
# cost more than the rounds themselves. The few most recent sets stay (a 384-image set of 640 px
# JPEGs is about 20 MB); their boxes are read-only, since every caller shares them.
@functools.lru_cache(maxsize=4)
def _encoded_images(
    n: int,
    seed: int,
    min_size: int,
    max_size: int,
    num_classes: int,
    max_objects: int,
    image_format: str,
) -> tuple[SyntheticImage, ...]:
    rng = np.random.default_rng(seed)
    images = []
    for index in range(n):
        height, width = (int(v) for v in rng.integers(min_size, max_size + 1, size=2))
        image = _background(rng, height, width)
        boxes = _draw_objects(rng, image, num_classes, max_objects)
        label = int(boxes[np.argmax(boxes[:, 3] * boxes[:, 4]), 0])
        boxes.flags.writeable = False
        ext = image_format if image_format != "mixed" else ("jpg", "png")[index % 2]
        ok, encoded = cv2.imencode(f".{ext}", image)
        if not ok:  # pragma: no cover - cv2 encodes uint8 BGR images
            raise RuntimeError(f"cv2.imencode failed for a {height}x{width} image")
        images.append(SyntheticImage(encoded.tobytes(), label, boxes, height, width))
    return tuple(images)


def make_clips(
    n: int,
    seed: int = 0,
    sample_rate: int = 32000,
    min_seconds: float = 2.0,
    max_seconds: float = 7.0,
    num_classes: int = 4,
) -> list[SyntheticClip]:
    """Draw ``n`` clips of varied length: class k is a harmonic tone near a class pitch.

    Args:
        n: number of clips.
        seed: seed of the generator; the same seed gives the same samples.
        sample_rate: samples per second.
        min_seconds: shortest clip.
        max_seconds: longest clip.
        num_classes: number of classes (pitches 400 Hz apart from 500 Hz).
    """
    _check_positive(
        n=n,
        sample_rate=sample_rate,
        min_seconds=min_seconds,
        max_seconds=max_seconds,
        num_classes=num_classes,
    )
    if min_seconds > max_seconds:
        raise ConfigError(f"min_seconds must be <= max_seconds, got {min_seconds} > {max_seconds}")
    rng = np.random.default_rng(seed)
    clips = []
    for index in range(n):
        label = index % num_classes
        length = int(rng.uniform(min_seconds, max_seconds) * sample_rate)
        t = np.arange(length, dtype=np.float64) / sample_rate
        pitch_hz = 500.0 + 400.0 * label + rng.uniform(-30.0, 30.0)
        vibrato = 1.0 + 0.01 * np.sin(2 * np.pi * rng.uniform(3.0, 7.0) * t)
        phase = 2 * np.pi * pitch_hz * np.cumsum(vibrato) / sample_rate
        tone = sum(np.sin(k * phase) / k for k in (1, 2, 3))
        envelope = 0.5 + 0.5 * np.sin(2 * np.pi * rng.uniform(0.2, 1.0) * t) ** 2
        noise = rng.normal(0.0, rng.uniform(0.02, 0.1), size=length)
        waveform = (0.3 * envelope * tone + noise).astype(np.float32)
        clips.append(SyntheticClip(waveform, label, sample_rate))
    return clips

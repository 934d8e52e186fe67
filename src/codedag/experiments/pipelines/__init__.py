"""Realistic training data pipelines, synthetic and generated in memory from a seed.

Written the way practitioners write them (helper functions, operators, ndarray methods, slicing
into canvases, transform objects, random augmentation seeded per DataLoader worker), they are
what codedag's tracer, optimizer, batched execution and loader tuning are measured and tested on.
Each pipeline is a module with ``make_dataset(n=..., seed=..., **sizes)``, ``make_loader(
batch_size=..., num_workers=..., seed=..., **options)`` callable without arguments, a one-line
``DESCRIPTION`` and the library ``CALLS`` its samples make::

    codedag trace --dataloader codedag.experiments.pipelines.letterbox:make_loader --out out/

See docs/pipelines.md.

* :mod:`.audio_files`: An audio competition pipeline: WAV files on disk, resampled on load,
  log-mel spectrograms
* :mod:`.compose`: Classification training augmentation as an albumentations-style ``Compose``
  recipe
* :mod:`.demo_audio`: The demo's audio pipeline (:mod:`codedag.experiments.demo_data`) behind the
  pipelines' factories
* :mod:`.demo_image`: The demo's image pipeline (:mod:`codedag.experiments.demo_data`) behind the
  pipelines' factories
* :mod:`.letterbox`: Detector-style inference preprocessing: letterbox, color conversion, blur,
  normalize
* :mod:`.loaders`: DataLoader construction shared by the example pipelines: seeding as real
  projects do it
* :mod:`.pil_with`: PIL the way Pillow's docs recommend: each file opened in a ``with`` block,
  then NumPy
* :mod:`.pil_recipe`: A torchvision-style classification recipe written with PIL: files on disk,
  opened per sample
* :mod:`.mel`: Audio classification front end: fixed-length crops, librosa log-mel spectrograms, an
  image
* :mod:`.synthetic`: Synthetic data for the example pipelines, generated in memory from a seed
  (nothing downloaded)
* :mod:`.transforms`: Albumentations-style image transforms written with cv2 and NumPy
* :mod:`.volume`: 3D medical segmentation preprocessing with NumPy: volumes on disk, cropped and
  flipped
* :mod:`.yolo_augment`: Detection augmentation helpers in YOLO's style: box formats, random
  perspective, HSV jitter
* :mod:`.yolo_files`: YOLO-style detection training from image files on disk: imread,
  letterbox, warp, HSV, flips
* :mod:`.yolo_mosaic`: YOLO-style detection training: mosaic, random perspective, HSV jitter,
  flips, letterbox
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from codedag.errors import ConfigError
from codedag.experiments.pipelines import (
    audio_files,
    compose,
    demo_audio,
    demo_image,
    letterbox,
    mel,
    pil_recipe,
    pil_with,
    volume,
    yolo_files,
    yolo_mosaic,
)

PIPELINES: dict[str, ModuleType] = {
    "letterbox": letterbox,
    "compose": compose,
    "yolo_mosaic": yolo_mosaic,
    "mel": mel,
    "demo_image": demo_image,
    "demo_audio": demo_audio,
    "pil_recipe": pil_recipe,
    "volume": volume,
    "pil_with": pil_with,
    "audio_files": audio_files,
    "yolo_files": yolo_files,
}


def pipeline_names() -> list[str]:
    """The pipelines' names, in a stable order."""
    return list(PIPELINES)


def pipeline(name: str) -> ModuleType:
    """The module of pipeline ``name``; :class:`ConfigError` naming the known ones otherwise."""
    module = PIPELINES.get(name) if isinstance(name, str) else None
    if module is None:
        raise ConfigError(f"unknown pipeline {name!r}; known: {', '.join(pipeline_names())}")
    return module


def describe(name: str) -> str:
    """One line: what pipeline ``name`` does per sample."""
    return str(pipeline(name).DESCRIPTION)


def make_dataset(name: str, **kwargs: Any) -> Any:
    """Pipeline ``name``'s Dataset; ``kwargs`` go to its ``make_dataset``."""
    return pipeline(name).make_dataset(**kwargs)


def make_loader(name: str, **kwargs: Any) -> Any:
    """Pipeline ``name``'s DataLoader; ``kwargs`` go to its ``make_loader``."""
    return pipeline(name).make_loader(**kwargs)


__all__ = [
    "PIPELINES",
    "describe",
    "make_dataset",
    "make_loader",
    "pipeline",
    "pipeline_names",
]

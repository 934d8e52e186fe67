"""Preprocessing written the way training code writes it: helpers, operators, methods, slices.

A module of its own so the tracer's filter sees it as user code. The functions follow well-known
public pipelines (letterbox and mosaic of YOLO-style detection loaders, ImageNet-style
normalization, a log-mel audio front end) without copying any of them.
"""

from __future__ import annotations

import random

import cv2
import numpy as np

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def letterbox(img: np.ndarray, new_shape: int = 64, color: int = 114) -> np.ndarray:
    """Resize keeping the aspect ratio, then pad to a square canvas."""
    h, w = img.shape[:2]
    r = new_shape / max(h, w)
    nh, nw = round(h * r), round(w * r)
    img = cv2.resize(img, (nw, nh), interpolation=cv2.INTER_LINEAR)
    top, left = (new_shape - nh) // 2, (new_shape - nw) // 2
    bottom, right = new_shape - nh - top, new_shape - nw - left
    return cv2.copyMakeBorder(
        img, top, bottom, left, right, cv2.BORDER_CONSTANT, value=(color, color, color)
    )


def resize_only(img: np.ndarray, size: int = 48) -> np.ndarray:
    """A helper that returns what a library call made."""
    out = cv2.resize(img, (size, size))
    return out


def detect_sample(img: np.ndarray) -> np.ndarray:
    """letterbox -> cvtColor -> blur, through a helper's return."""
    img = resize_only(img)
    img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
    return cv2.GaussianBlur(img, (3, 3), 0)


def classify_sample(img: np.ndarray) -> np.ndarray:
    """blur -> normalize written with operators -> CHW."""
    img = cv2.GaussianBlur(img, (3, 3), 0)
    img = img.astype(np.float32) / 255.0
    img = (img - MEAN) / STD
    img = img.transpose(2, 0, 1)
    return np.ascontiguousarray(img)


def mosaic(images: list[np.ndarray], size: int = 32) -> np.ndarray:
    """Four resized images pasted into a canvas by slice assignment, then an affine warp."""
    canvas = np.full((2 * size, 2 * size, 3), 114, dtype=np.uint8)
    for i, img in enumerate(images[:4]):
        tile = cv2.resize(img, (size, size))
        y0, x0 = (i // 2) * size, (i % 2) * size
        canvas[y0 : y0 + size, x0 : x0 + size] = tile
    matrix = np.float32([[1, 0, 2], [0, 1, -3]])
    return cv2.warpAffine(canvas, matrix, (2 * size, 2 * size), borderValue=(114, 114, 114))


def random_flip(img: np.ndarray) -> np.ndarray:
    """Random augmentation drawing from Python's random and NumPy's global state."""
    if random.random() < 0.5:
        img = img[:, ::-1]
    gain = np.random.uniform(0.8, 1.2)
    return np.clip(img.astype(np.float32) * gain, 0, 255).astype(np.uint8)


def mel_features(y: np.ndarray, sr: int = 16000) -> np.ndarray:
    """load -> melspectrogram -> power_to_db -> min-max normalize."""
    import librosa

    y = y[: sr // 2]
    mel = librosa.feature.melspectrogram(y=y, sr=sr, n_fft=512, hop_length=128, n_mels=32)
    db = librosa.power_to_db(mel, ref=np.max)
    db = (db - db.min()) / (db.max() - db.min() + 1e-6)
    return db.astype(np.float32)


def load_audio(seconds: float = 1.0, sr: int = 16000) -> np.ndarray:
    """A deterministic 'decoded' waveform (no file I/O in tests)."""
    t = np.arange(int(seconds * sr), dtype=np.float32) / sr
    return (0.5 * np.sin(2 * np.pi * 440.0 * t)).astype(np.float32)


def mel_pipeline() -> np.ndarray:
    y = load_audio()
    return mel_features(y)


def two_channels(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """np.concatenate of two user arrays, then an operator on the result."""
    both = np.concatenate([left, right], axis=0)
    return both * 0.5

"""Small pipelines the tracer tests run (a module of their own: it is user code to the filter)."""

from __future__ import annotations

import cv2
import numpy as np
from cv2 import resize as bound_resize  # bound at import time: the tracer must still see it


def chain(img: np.ndarray) -> np.ndarray:
    small = cv2.resize(img, (32, 32))
    rgb = cv2.cvtColor(small, cv2.COLOR_BGR2RGB)
    return cv2.normalize(rgb, None, 0.0, 1.0, cv2.NORM_MINMAX, dtype=cv2.CV_32F)


def aliased(img: np.ndarray) -> np.ndarray:
    return np.clip(bound_resize(img, (8, 8)), 10, 200)


def produce() -> np.ndarray:
    return np.zeros(16)


def consume(x: np.ndarray) -> int:
    return int(x.shape[0])


def boom(x: int) -> int:
    helper(x)
    raise ValueError(f"bad sample {x}")


def helper(x: int) -> int:
    return x + 1


def nested(depth: int) -> int:
    return 0 if depth == 0 else nested(depth - 1) + 1


class Weird:
    """A value type whose description fails: the tracer must survive it."""

    @property
    def shape(self) -> tuple[int, ...]:
        raise RuntimeError("no shape for you")

    nbytes = 1


def takes_weird(w: Weird) -> int:
    return 1


def array_user(img: np.ndarray) -> np.ndarray:
    return np.clip(cv2.GaussianBlur(img, (3, 3), 0), 0, 255)


def pil_pipeline(arr: np.ndarray) -> np.ndarray:
    from PIL import Image

    image = Image.fromarray(arr)
    small = image.resize((8, 8))
    return np.asarray(small)


def tokenize(i: int) -> int:
    return i % 97


def score(n: int) -> int:
    """A pure-Python loop calling a data-free helper many times."""
    total = 0
    for i in range(n):
        total += tokenize(i)
    return total


def scale_all(arrays: list[np.ndarray]) -> list[np.ndarray]:
    """A helper that touches arrays at every call: never pruned."""
    return [halve(a) for a in arrays]


def halve(a: np.ndarray) -> np.ndarray:
    return a * 0.5

"""difference(): a migrated call's result against the library's, through the tolerance table."""

from __future__ import annotations

import numpy as np
from PIL import Image

from codedag.migrate.tolerances import difference


def test_equal_and_within_tolerance_are_none() -> None:
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    assert difference("cv2.flip", a, a.copy()) is None
    # cv2.resize allows float values within atol 1e-2
    assert difference("cv2.resize", a, a + np.float32(5e-3)) is None
    assert difference("numpy.sum", np.float32(3.0), np.float32(3.0)) is None
    assert difference("numpy.mean", (a, 1), (a.copy(), 1)) is None


def test_each_kind_of_difference_is_named() -> None:
    a = np.zeros((2, 2), np.uint8)
    assert "shape" in (difference("cv2.flip", a, a[:1]) or "")
    assert "dtype" in (difference("cv2.flip", a, a.astype(np.int16)) or "")
    one_off = a.copy()
    one_off[0, 0] = 1
    assert "1 of 4 values" in (difference("cv2.flip", a, one_off) or "")
    assert "ndarray of 2 where the library returns tuple of 1" in (difference("x", (a,), a) or "")
    assert "item 1" in (difference("x", (a, 2), (a, 3)) or "")
    assert difference("numpy.abs", np.array([5.0]), np.array([3.0])) is not None


def test_pil_images_compare_mode_size_and_pixels() -> None:
    img = Image.new("RGB", (4, 3), (1, 2, 3))
    assert difference("PIL.Image.Image.resize", img, img.copy()) is None
    assert "PIL L" in (difference("PIL.Image.Image.resize", img, img.convert("L")) or "")
    other = img.copy()
    other.putpixel((0, 0), (9, 9, 9))
    assert "values" in (difference("PIL.Image.Image.resize", img, other) or "")

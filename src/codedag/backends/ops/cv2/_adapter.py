"""The cv2 adapter and the declaration helper of the cv2 ops.

cv2 takes NumPy arrays and hands them to C++ as ``cv::Mat``: an ``(H, W)`` or ``(H, W, C)`` array is
an image of 1 or C channels, and an ``(H, W, 1)`` array is the same one-channel image as ``(H, W)``
(cv2 returns one-channel results as ``(H, W)``). Images reach the backends as batches of one,
``(1, H, W)`` or ``(1, H, W, C)``; a 0-d result (``threshold``'s retval) comes back as a Python
float, arrays C-contiguous.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from codedag.backends.adapters import BatchAdapter
from codedag.backends.contract import OpSpec, declare


def _python_scalar(array: np.ndarray) -> Any:
    return array.item()


CV2 = BatchAdapter(
    "cv2",
    frozenset({"src", "src1", "src2", "image"}),
    (2, 3),
    squeeze_channel=True,
    channel_axis=True,
    scalar=_python_scalar,
    default_order="C",
    scalar_params=frozenset({"src2"}),
)


def op(name: str, backend: Callable[..., Any], **quirks: Any) -> OpSpec:
    """Declare a cv2 op: its canonical name, batch-first backend and quirks."""
    return declare(name, backend, CV2, **quirks)

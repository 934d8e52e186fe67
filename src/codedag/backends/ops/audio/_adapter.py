"""The librosa adapter and the declaration helper of the librosa ops.

Every signal or spectrogram argument of a call (``y``, ``S``, ``S_db``) is one sample: it reaches the backend
with a leading batch axis of one ((T,) becomes (1, T)); results lose it and come back as arrays
keeping the backend's strides unless an op declares a layout (``librosa.stft``: Fortran order, as
librosa returns it), 0-d results as NumPy scalars.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from codedag.backends.adapters import BatchAdapter
from codedag.backends.contract import OpSpec, declare

AUDIO = BatchAdapter(
    "audio", frozenset({"y", "S", "S_db"}), (1, 2, 3, 4), first_is_data=False, default_order="K"
)


def op(name: str, backend: Callable[..., Any], **quirks: Any) -> OpSpec:
    """Declare a librosa op."""
    return declare(name, backend, AUDIO, **quirks)

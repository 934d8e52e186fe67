"""Torch backends of librosa (no torchaudio), batch-first: one library call is one sample.

Every module of this package holds backends and their declarations (``OPS``). ``BACKENDS`` maps
librosa's public paths (``librosa.stft``) to the backends; the registry resolves the names the
tracer reports (``librosa.core.spectrum.stft``) to the same functions.

* :mod:`._adapter`: The librosa adapter and the declaration helper of the librosa ops
* :mod:`.facts`: What codedag knows about librosa besides its backends: plain data, no imports
* :mod:`.resample`: Torch backend of ``librosa.resample`` for ``res_type`` 'polyphase', 'fft' and
  'scipy'
* :mod:`.spectral`: Torch backends of librosa: stft, melspectrogram, power/amplitude_to_db, mfcc
  (no torchaudio)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from codedag.backends.contract import Library, collect_specs
from codedag.backends.ops.audio._adapter import AUDIO
from codedag.backends.ops.audio.facts import FACTS
from codedag.backends.ops.audio.spectral import mel_filterbank

LIBRARY = Library(FACTS, AUDIO, collect_specs(__name__, __path__))
BACKENDS: dict[str, Callable[..., Any]] = LIBRARY.backends()

__all__ = ["BACKENDS", "LIBRARY", "mel_filterbank"]

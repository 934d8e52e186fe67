"""Torch backends of Pillow (``PIL.Image.Image`` methods, ``PIL.ImageOps``), bit-exact.

Images travel as :class:`~._batch.PILBatch` (a uint8 tensor plus the mode); :func:`from_pil` and
:func:`to_pil` convert lists of PIL images. Every module of this package holds backends and their
declarations (``OPS``). ``BACKENDS`` maps names to batch functions (for ``Image.filter``, the
function of any filter; the declared op is a FactoryOp built per filter configuration).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from codedag.backends.contract import Library, collect_specs
from codedag.backends.ops.pil._adapter import PIL
from codedag.backends.ops.pil._batch import PILBatch, from_pil, to_pil
from codedag.backends.ops.pil.facts import FACTS
from codedag.backends.ops.pil.imageops import filter_

LIBRARY = Library(FACTS, PIL, collect_specs(__name__, __path__))
BACKENDS: dict[str, Callable[..., Any]] = {
    **LIBRARY.backends(),
    "PIL.Image.Image.filter": filter_,
}

__all__ = ["BACKENDS", "LIBRARY", "PILBatch", "from_pil", "to_pil"]

"""Torch backends of Pillow (``PIL.Image.Image`` methods, ``PIL.ImageOps``), bit-exact.

Images travel as :class:`~._batch.PILBatch` (a uint8 tensor plus the mode); :func:`from_pil` and
:func:`to_pil` convert lists of PIL images. Every module of this package holds backends and their
declarations (``OPS``). ``BACKENDS`` maps names to batch functions (for ``Image.filter``, the
function of any filter; the declared op is a FactoryOp built per filter configuration).

* :mod:`._adapter`: The PIL adapter and the declaration helper of the PIL ops
* :mod:`._batch`: PILBatch: N PIL images of one mode and size as one uint8 tensor, and the helpers
  the PIL backends share (Pillow's enum values, alpha premultiplication)
* :mod:`.facts`: What codedag knows about Pillow (PIL) besides its backends: plain data, no imports
* :mod:`.filter`: ``PIL.Image.Image.filter``: a FactoryOp, a transform built once per configuration
  and cached on the device
* :mod:`.image`: Torch backends of PIL.Image: resize, convert, transpose, crop, on
  :class:`~._batch.PILBatch`; rotate lives in :mod:`.rotate`, ImageOps in :mod:`.imageops`,
  ``Image.filter`` in :mod:`.filter`
* :mod:`.imageops`: Torch backends of PIL.ImageOps, and the batch function of ``Image.filter`` for
  the filters that are not convolution kernels (:mod:`.filter` declares the op), on PILBatch
* :mod:`.rotate`: Torch backend of ``PIL.Image.Image.rotate``: Pillow's affine transform, bit for
  bit
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

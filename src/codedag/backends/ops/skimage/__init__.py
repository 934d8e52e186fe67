"""scikit-image's image functions: no backends, only the facts the tracer, the optimizer and the
prefix cache read (a chain runs from ``skimage.io.imread`` through ``skimage.transform.resize``
as through ``cv2.imread`` and ``cv2.resize``).

* :mod:`.facts`: What codedag knows about scikit-image: plain data, no imports
"""

from __future__ import annotations

from codedag.backends.contract import Library
from codedag.backends.ops.numpy._adapter import NUMPY
from codedag.backends.ops.skimage.facts import FACTS

LIBRARY = Library(FACTS, NUMPY, ())

__all__ = ["LIBRARY"]

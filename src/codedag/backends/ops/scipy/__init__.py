"""SciPy's image functions (``scipy.ndimage``): no backends, only the facts the tracer, the
optimizer and the prefix cache read (a chain runs through ``scipy.ndimage.zoom`` as through
``cv2.resize``).

* :mod:`.facts`: What codedag knows about SciPy: plain data, no imports
"""

from __future__ import annotations

from codedag.backends.contract import Library
from codedag.backends.ops.numpy._adapter import NUMPY
from codedag.backends.ops.scipy.facts import FACTS

LIBRARY = Library(FACTS, NUMPY, ())

__all__ = ["LIBRARY"]

"""tifffile's reader: no backends, only the facts the tracer and the prefix cache read (a chain
may start at ``tifffile.imread`` as at ``cv2.imread``).

* :mod:`.facts`: What codedag knows about tifffile: plain data, no imports
"""

from __future__ import annotations

from codedag.backends.contract import Library
from codedag.backends.ops.numpy._adapter import NUMPY
from codedag.backends.ops.tifffile.facts import FACTS

LIBRARY = Library(FACTS, NUMPY, ())

__all__ = ["LIBRARY"]

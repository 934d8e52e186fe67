"""imageio's readers: no backends, only the facts the tracer and the prefix cache read (a chain
may start at ``imageio.v3.imread`` as at ``cv2.imread``).

* :mod:`.facts`: What codedag knows about imageio: plain data, no imports
"""

from __future__ import annotations

from codedag.backends.contract import Library
from codedag.backends.ops.imageio.facts import FACTS
from codedag.backends.ops.numpy._adapter import NUMPY

LIBRARY = Library(FACTS, NUMPY, ())

__all__ = ["LIBRARY"]

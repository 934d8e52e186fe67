"""Torch backends of OpenCV (cv2) functions, batch-first (N,H,W[,C]), keyed by canonical name.

Every module of this package holds backends and their declarations (``OPS``); the package collects
them, so adding an op is adding a module (or a function and its ``OPS`` entry to one), its
tolerance declared with it. ``facts.py`` holds what codedag knows about cv2 besides the backends
(functions that stay on the CPU, namespaces the tracer indexes, distributions). ``BACKENDS`` maps
canonical names to the backends, which are also attributes of this package
(``codedag.backends.ops.cv2.resize``). Every function not declared here keeps running in cv2.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from codedag.backends.contract import Library, collect_specs
from codedag.backends.ops.cv2._adapter import CV2
from codedag.backends.ops.cv2.facts import FACTS

LIBRARY = Library(FACTS, CV2, collect_specs(__name__, __path__))
BACKENDS: dict[str, Callable[..., Any]] = LIBRARY.backends()
globals().update({name.rsplit(".", 1)[1]: backend for name, backend in BACKENDS.items()})

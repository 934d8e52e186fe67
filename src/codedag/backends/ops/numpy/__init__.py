"""Torch backends of NumPy, with NumPy's semantics (dtypes, promotion, NaN, scalars).

Every module of this package holds backends and their declarations (``OPS``): elementwise
functions, reductions, order statistics, shape functions, FFT and random draws. Each function is
declared once under one of its public names; the registry resolves the other names of the same
object (``numpy.abs`` and ``numpy.absolute``, ``numpy.concat`` and ``numpy.concatenate``) through
its canonical name. ``BACKENDS`` maps the declared names to the backends.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from codedag.backends.contract import Library, collect_specs
from codedag.backends.ops.numpy._adapter import NUMPY, op
from codedag.backends.ops.numpy.facts import FACTS

LIBRARY = Library(FACTS, NUMPY, collect_specs(__name__, __path__), op=op)
BACKENDS: dict[str, Callable[..., Any]] = LIBRARY.backends()

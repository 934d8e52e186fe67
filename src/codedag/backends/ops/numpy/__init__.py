"""Torch backends of NumPy, with NumPy's semantics (dtypes, promotion, NaN, scalars).

Every module of this package holds backends and their declarations (``OPS``): elementwise
functions, reductions, order statistics, shape functions, FFT and random draws. Each function is
declared once under one of its public names; the registry resolves the other names of the same
object (``numpy.abs`` and ``numpy.absolute``, ``numpy.concat`` and ``numpy.concatenate``) through
its canonical name. ``BACKENDS`` maps the declared names to the backends.

* :mod:`._adapter`: The NumPy adapter and the declaration helper of the NumPy ops
* :mod:`._checks`: Declared checks of the NumPy ops: what each backend does not reproduce, decided
  on the call's own arguments before anything is converted (NumPy arrays, Python scalars), so such
  calls run NumPy
* :mod:`._common`: Helpers shared by the NumPy backends: dtype maps, NumPy's own type promotion,
  axis handling
* :mod:`._elementwise_checks`: Declared checks of the elementwise ops of :mod:`.elementwise`
* :mod:`._shape_checks`: Declared checks of the shape functions, padding and products of
  :mod:`.shape`
* :mod:`._ufuncs`: NumPy's ufuncs on torch: each ufunc's torch kernel and the backend factories
  that give it NumPy's signature, result dtype and operand casts
* :mod:`.elementwise`: Torch backends of NumPy: elementwise math, comparisons, clip, where, round
  and dtype conversion
* :mod:`.facts`: What codedag knows about NumPy besides its backends: plain data, no imports
* :mod:`.fft`: Torch backends of ``numpy.fft``
* :mod:`.random`: Torch backends of the legacy ``numpy.random`` draws
* :mod:`.reduce`: Torch backends of NumPy reductions: sum, prod, mean, std, var, min, max, argmax,
  argmin,
* :mod:`.shape`: Torch backends of NumPy's shape functions, padding, flips and products
* :mod:`.stats`: Torch backends of NumPy order statistics and norms: median, percentile, quantile,
  sort, argsort, linalg.norm (vector norms)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from codedag.backends.contract import Library, collect_specs
from codedag.backends.ops.numpy._adapter import NUMPY, op
from codedag.backends.ops.numpy.facts import FACTS

LIBRARY = Library(FACTS, NUMPY, collect_specs(__name__, __path__), op=op)
BACKENDS: dict[str, Callable[..., Any]] = LIBRARY.backends()

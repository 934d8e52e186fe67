"""Torch backends of OpenCV (cv2) functions, batch-first (N,H,W[,C]), keyed by canonical name.

Every module of this package holds backends and their declarations (``OPS``); the package collects
them, so adding an op is adding a module (or a function and its ``OPS`` entry to one), its
tolerance declared with it. ``facts.py`` holds what codedag knows about cv2 besides the backends
(functions that stay on the CPU, namespaces the tracer indexes, distributions). ``BACKENDS`` maps
canonical names to the backends, which are also attributes of this package
(``codedag.backends.ops.cv2.resize``). Every function not declared here keeps running in cv2.

* :mod:`._adapter`: The cv2 adapter and the declaration helper of the cv2 ops
* :mod:`._arith_checks`: Declared checks of the arithmetic of :mod:`.arith`, and cv2's norm types
* :mod:`._common`: Shared helpers of the cv2 backends: constants, dtypes, cv2 rounding and
  saturation, borders
* :mod:`._correlate`: cv2's filter engine on torch: borders, anchors, output depths, separable and
  2-D correlation, exact integer taps, ``Filter2D``'s float32 fused multiply-adds
* :mod:`._filter_checks`: Declared checks of the filters of :mod:`.filter`
* :mod:`._filter_kernels`: cv2's Gaussian and derivative kernels and GaussianBlur's kernel size
* :mod:`._warp_coords`: Source coordinates of cv2 5's warp kernels: float32 ``fma`` of the inverse
  matrix, bit for bit
* :mod:`._warp_fast`: Fast exact paths of cv2 5's bilinear warp kernel (uint8 and float32 images)
* :mod:`._hsv`: cv2's HSV and HLS conversions, bit for bit: each pixel as cv2's SIMD or scalar code
  computes it
* :mod:`.arith`: cv2 per-pixel arithmetic on torch, batch-first: add, subtract, multiply, absdiff,
  addWeighted, convertScaleAbs, normalize, LUT
* :mod:`.canny`: ``cv2.Canny`` on torch, batch-first, for uint8 images with 1, 3 or 4 channels
* :mod:`.color`: ``cv2.cvtColor`` on torch, batch-first: BGR/RGB(A) swaps, GRAY, YCrCb, YUV, XYZ,
  HSV, HLS, Lab
* :mod:`.facts`: What codedag knows about OpenCV (cv2) besides its backends: plain data, no imports
* :mod:`.filter`: cv2 linear and median filters on torch, batch-first: GaussianBlur, blur,
  boxFilter, filter2D, Sobel, medianBlur
* :mod:`.geometry`: cv2 flips, transposes, rotations by 90 degrees and ``copyMakeBorder`` on torch,
  batch-first
* :mod:`.hist`: cv2 ``threshold`` (all five types, Otsu, triangle) and ``equalizeHist`` on torch,
  batch-first
* :mod:`.resize`: ``cv2.resize`` on torch, batch-first, reproducing cv2's sampling grid and weights
  exactly
* :mod:`.warp`: ``cv2.warpAffine`` and ``cv2.warpPerspective`` on torch, batch-first
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

"""Declared checks of the cv2 filters: what each backend of :mod:`.filter` does not reproduce,
decided on the call's own arguments (NumPy arrays, Python values) before anything is converted."""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from codedag.backends.ops.cv2._common import (
    BORDER_DEFAULT,
    CV_8U,
    CV_16S,
    CV_32F,
    CV_64F,
    DEPTH_TO_DTYPE,
    border_reason,
    channels_of,
    finite,
    int_pair,
    is_int,
    is_number,
)
from codedag.backends.ops.cv2._correlate import FILTER_BORDERS, dft_integer_reason, uses_dft
from codedag.backends.ops.cv2._filter_kernels import gaussian_size

# (source dtype, ddepth) pairs cv2's filter engine has, ddepth -1 meaning the source's.
_DEPTHS = {
    "uint8": (-1, CV_8U, CV_16S, CV_32F, CV_64F),
    "float32": (-1, CV_32F, CV_64F),
    "float64": (-1, CV_64F),
}
_NONFINITE = "non-finite values: cv2's SIMD filters skip zero taps, so NaN and inf spread otherwise"


def _common_reason(src: Any, ddepth: Any, border_type: Any, finite_only: bool = True) -> str | None:
    if not is_int(ddepth) or int(ddepth) not in _DEPTHS.get(src.dtype.name, ()):
        return f"ddepth {ddepth!r} for {src.dtype} images is not reproduced"
    reason = border_reason(border_type, FILTER_BORDERS)
    if reason is None and finite_only and not finite(src):
        return _NONFINITE
    return reason


def _anchor_reason(anchor: object, kw: int, kh: int) -> str | None:
    if anchor is None:
        return None
    pair = int_pair(anchor)
    if pair is None:
        return f"anchor {anchor!r} is not a point"
    ax, ay = pair
    if not (-1 <= ax < kw and -1 <= ay < kh):
        return f"anchor {anchor!r} outside a {kw}x{kh} kernel"
    return None


def check_gaussian_blur(
    src: Any,
    ksize: Any,
    sigmaX: Any,
    dst: Any = None,
    sigmaY: Any = 0,
    borderType: Any = BORDER_DEFAULT,
    hint: Any = None,
) -> str | None:
    """Odd kernel sizes (or 0 with a positive sigma), finite values, filter borders."""
    size = int_pair(ksize)
    if size is None or not (is_number(sigmaX) and is_number(sigmaY)):
        return f"ksize {ksize!r} and sigmas {(sigmaX, sigmaY)!r}: expected a size and numbers"
    if hint not in (None, 0):
        return f"hint {hint!r}: only the default algorithm is reproduced"
    kw, kh, _sx, _sy = gaussian_size(size, sigmaX, sigmaY, src.dtype == np.uint8)
    if kw <= 0 or kh <= 0 or kw % 2 == 0 or kh % 2 == 0:
        return f"kernel size {(kw, kh)} is not odd and positive"
    return _common_reason(src, -1, borderType)


def check_box_filter(
    src: object,
    ddepth: object,
    ksize: object,
    dst: object = None,
    anchor: object = (-1, -1),
    normalize: object = True,
    borderType: object = BORDER_DEFAULT,
) -> str | None:
    """Positive kernel sizes, an anchor inside, a depth the filter engine has."""
    size = int_pair(ksize)
    if size is None or min(size) <= 0:
        return f"ksize {ksize!r} is not a positive size"
    if not isinstance(normalize, bool | int):
        return f"normalize {normalize!r} is not a bool"
    return _anchor_reason(anchor, *size) or _common_reason(src, ddepth, borderType)


def check_blur(
    src: object,
    ksize: object,
    dst: object = None,
    anchor: object = (-1, -1),
    borderType: object = BORDER_DEFAULT,
) -> str | None:
    """As boxFilter, normalized, in the source's depth."""
    return check_box_filter(src, -1, ksize, dst, anchor, True, borderType)


def check_filter2d(
    src: object,
    ddepth: object,
    kernel: object,
    dst: object = None,
    anchor: object = (-1, -1),
    delta: object = 0,
    borderType: object = BORDER_DEFAULT,
) -> str | None:
    """A real 1-D or 2-D kernel, an anchor inside, a numeric delta; finite values (always for
    kernels cv2 correlates through its DFT); no integer output of a kernel cv2 correlates through
    its DFT (:func:`uses_dft`)."""
    if not isinstance(kernel, np.ndarray) or kernel.dtype.kind not in "iuf" or kernel.ndim > 2:
        return f"kernel {type(kernel).__name__}: expected a 1-D or 2-D real array"
    if kernel.size == 0 or not np.isfinite(kernel).all():
        return "an empty or non-finite kernel"
    if not is_number(delta):
        return f"delta {delta!r} is not a number"
    kh, kw = kernel.shape if kernel.ndim == 2 else (kernel.shape[0], 1)
    reason = _anchor_reason(anchor, kw, kh) or _common_reason(src, ddepth, borderType)
    if reason is not None:
        return reason
    sdtype = getattr(torch, np.asarray(src).dtype.name)
    depth = int(ddepth)  # type: ignore[call-overload]  # checked by _common_reason
    ddtype = sdtype if depth < 0 else DEPTH_TO_DTYPE[depth]
    if uses_dft(sdtype, ddtype, kw, kh) and not ddtype.is_floating_point:
        return dft_integer_reason(kw, kh)
    return None


def check_sobel(
    src: Any,
    ddepth: Any,
    dx: Any,
    dy: Any,
    dst: Any = None,
    ksize: Any = 3,
    scale: Any = 1,
    delta: Any = 0,
    borderType: Any = BORDER_DEFAULT,
) -> str | None:
    """Derivative orders below the aperture (1, 3, 5, 7; -1: Scharr, first order)."""
    if not (is_int(dx) and is_int(dy) and is_int(ksize)):
        return f"dx, dy, ksize {(dx, dy, ksize)!r} are not integers"
    dx, dy, ksize = int(dx), int(dy), int(ksize)
    if dx < 0 or dy < 0 or dx + dy == 0:
        return f"derivative orders {(dx, dy)} (cv2 needs dx, dy >= 0 and dx + dy > 0)"
    if ksize == -1:
        if dx + dy != 1:
            return f"Scharr needs dx + dy == 1, got {(dx, dy)}"
    elif ksize not in (1, 3, 5, 7) or max(dx, dy) >= max(ksize, 3):
        return f"ksize {ksize} for orders {(dx, dy)}: expected 1, 3, 5 or 7 above the orders"
    if not (is_number(scale) and is_number(delta)):
        return f"scale, delta {(scale, delta)!r} are not numbers"
    return _common_reason(src, ddepth, borderType)


def check_median_blur(src: Any, ksize: Any, dst: Any = None) -> str | None:
    """An odd aperture; apertures above 5 on uint8 images of 1, 3 or 4 channels only, as cv2;
    finite values."""
    if not is_int(ksize) or int(ksize) < 1 or int(ksize) % 2 == 0:
        return f"ksize {ksize!r} is not odd and positive"
    if src.dtype != np.uint8 and int(ksize) > 5:
        return f"ksize {ksize} on {src.dtype}: cv2 takes 3 or 5 only"
    if int(ksize) > 5 and channels_of(src) not in (1, 3, 4):
        return f"ksize {ksize} on {channels_of(src)} channels: cv2 takes 1, 3 or 4 (it raises)"
    if not finite(src):
        return "non-finite values: cv2's sorting network orders NaN its own way"
    return None

"""Declared checks of the cv2 arithmetic of :mod:`.arith`: what each backend does not reproduce,
decided on the call's own arguments (NumPy arrays, Python values) before anything is converted."""

from __future__ import annotations

from typing import Any

import numpy as np

from codedag.backends.ops.cv2._common import (
    CV_8S,
    CV_16S,
    CV_16U,
    CV_32S,
    DEPTH_TO_DTYPE,
    channels_of,
    finite,
    is_int,
    is_number,
    mat_shape,
    scalar_reason,
)

NORM_INF, NORM_L1, NORM_L2, NORM_MINMAX = 1, 2, 4, 32
ARITH_DTYPES = frozenset({"uint8", "float32", "float64"})
"""The image dtypes the arithmetic backends take."""
_DEPTHS = frozenset(DEPTH_TO_DTYPE) - {CV_16U, CV_8S, CV_16S, CV_32S}
_LUT_DTYPES = frozenset({"uint8", "int8", "uint16", "int16", "int32", "float32", "float64"})


def _operand_reason(src1: Any, src2: Any, dtype: Any, scalars: bool = True) -> str | None:
    if not is_int(dtype) or (int(dtype) >= 0 and int(dtype) not in _DEPTHS):
        return f"dtype {dtype!r} is not one of cv2's depths {sorted(_DEPTHS)}"
    if isinstance(src2, np.ndarray):
        if mat_shape(src2) != mat_shape(src1):
            return f"operands of shapes {src1.shape} and {src2.shape}"
        if src2.dtype != src1.dtype and int(dtype) < 0:
            return f"operands of dtypes {src1.dtype} and {src2.dtype} without dtype="
        if src2.dtype.name not in ARITH_DTYPES:
            return f"src2: dtype {src2.dtype} is not supported"
        return None
    if not scalars:
        return f"src2: {type(src2).__name__}; expected an array"
    if channels_of(src1) > 4:
        return f"a Scalar operand with {channels_of(src1)} channels (cv2 takes up to 4)"
    if src1.size <= 4:
        return "an array of at most 4 values with a Scalar: cv2 treats both as Scalars"
    return scalar_reason(src2)


def check_add(
    src1: object, src2: object, dst: object = None, mask: object = None, dtype: object = -1
) -> str | None:
    """Arrays of one shape and dtype (or ``dtype=``), or a Scalar; no mask."""
    if mask is not None:
        return "a mask is not supported"
    return _operand_reason(src1, src2, dtype)


def check_absdiff(src1: object, src2: object, dst: object = None) -> str | None:
    """Arrays of one shape and dtype, or a Scalar."""
    return _operand_reason(src1, src2, -1)


def check_multiply(
    src1: object, src2: object, dst: object = None, scale: object = 1, dtype: object = -1
) -> str | None:
    """As ``add``, with a numeric scale."""
    if not is_number(scale):
        return f"scale {scale!r} is not a number"
    return _operand_reason(src1, src2, dtype)


def check_add_weighted(
    src1: object,
    alpha: object,
    src2: object,
    beta: object,
    gamma: object,
    dst: object = None,
    dtype: object = -1,
) -> str | None:
    """Two arrays of one shape and dtype (or ``dtype=``), numeric factors."""
    if not all(is_number(v) for v in (alpha, beta, gamma)):
        return f"factors {(alpha, beta, gamma)!r} are not numbers"
    return _operand_reason(src1, src2, dtype, scalars=False)


def check_convert_scale_abs(
    src: object, dst: object = None, alpha: object = 1, beta: object = 0
) -> str | None:
    """Numeric factors."""
    if not (is_number(alpha) and is_number(beta)):
        return f"factors {(alpha, beta)!r} are not numbers"
    return None


def check_normalize(
    src: Any,
    dst: Any = None,
    alpha: Any = 1,
    beta: Any = 0,
    norm_type: Any = NORM_L2,
    dtype: Any = -1,
    mask: Any = None,
) -> str | None:
    """MINMAX, INF, L1 or L2 norms to a known depth; no mask."""
    if mask is not None:
        return "a mask is not supported"
    if not (is_number(alpha) and is_number(beta)):
        return f"alpha, beta {(alpha, beta)!r} are not numbers"
    if not is_int(norm_type) or int(norm_type) not in (NORM_INF, NORM_L1, NORM_L2, NORM_MINMAX):
        return f"norm_type {norm_type!r} unsupported; expected NORM_INF, L1, L2 or MINMAX"
    if not is_int(dtype) or (int(dtype) >= 0 and int(dtype) not in _DEPTHS):
        return f"dtype {dtype!r} is not one of cv2's depths {sorted(_DEPTHS)}"
    if src.dtype.kind == "f" and not finite(src):
        return "non-finite values (cv2's norms of NaN and inf are not reproduced)"
    return None


def check_lut(src: Any, lut: Any, dst: Any = None) -> str | None:
    """A table of 256 entries, with 1 or the image's channels."""
    if not isinstance(lut, np.ndarray) or lut.dtype.name not in _LUT_DTYPES:
        return f"lut: {type(lut).__name__} {getattr(lut, 'dtype', '')}; expected a NumPy table"
    cn = int(lut.shape[2]) if lut.ndim == 3 else 1
    total = lut.size // cn
    if total != 256 or cn not in (1, channels_of(src)) or lut.ndim > 3:
        return f"lut of shape {lut.shape} for an image of {channels_of(src)} channels"
    return None

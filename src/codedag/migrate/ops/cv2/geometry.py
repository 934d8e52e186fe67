"""cv2 flips, transposes, rotations by 90 degrees and ``copyMakeBorder`` on torch, batch-first.

These are index permutations: results are bit-exact for every dtype. Plain torch (``flip``,
``transpose``, ``rot90``, ``index_select``); kornia adds nothing here.
"""

from __future__ import annotations

from typing import Any

import torch

from codedag.errors import UnsupportedOperation
from codedag.migrate.contract import Fidelity
from codedag.migrate.ops.cv2._adapter import op
from codedag.migrate.ops.cv2._common import (
    BORDER_CONSTANT,
    BORDER_REFLECT,
    BORDER_REFLECT_101,
    BORDER_REPLICATE,
    BORDER_WRAP,
    as_nhwc,
    border_type_base,
    channels,
    check_image,
    like_input,
    pad_nhwc,
    scalar_values,
)

ROTATE_90_CLOCKWISE = 0
ROTATE_180 = 1
ROTATE_90_COUNTERCLOCKWISE = 2


def _no_dst(dst: Any, name: str) -> None:
    if dst is not None:
        raise UnsupportedOperation(f"{name}: an output array dst is not supported")


def flip(src: torch.Tensor, flipCode: int, dst: Any = None) -> torch.Tensor:
    """``cv2.flip``: 0 flips rows (vertical), > 0 columns (horizontal), < 0 both."""
    check_image(src)
    _no_dst(dst, "flip")
    code = int(flipCode)
    dims = [1] if code == 0 else [2] if code > 0 else [1, 2]
    return torch.flip(src, dims)


def transpose(src: torch.Tensor, dst: Any = None) -> torch.Tensor:
    """``cv2.transpose``: swap rows and columns of every image."""
    check_image(src)
    _no_dst(dst, "transpose")
    return src.transpose(1, 2).contiguous()


def rotate(src: torch.Tensor, rotateCode: int, dst: Any = None) -> torch.Tensor:
    """``cv2.rotate`` by 90, 180 or 270 degrees."""
    check_image(src)
    _no_dst(dst, "rotate")
    code = int(rotateCode)
    if code == ROTATE_90_CLOCKWISE:
        return torch.rot90(src, -1, dims=(1, 2)).contiguous()
    if code == ROTATE_180:
        return torch.flip(src, [1, 2])
    if code == ROTATE_90_COUNTERCLOCKWISE:
        return torch.rot90(src, 1, dims=(1, 2)).contiguous()
    raise UnsupportedOperation(f"rotate: rotateCode {rotateCode} unknown; expected 0, 1 or 2")


def copyMakeBorder(
    src: torch.Tensor,
    top: int,
    bottom: int,
    left: int,
    right: int,
    borderType: int,
    dst: Any = None,
    value: Any = None,
) -> torch.Tensor:
    """``cv2.copyMakeBorder``: constant (per-channel value), replicate, reflect(101), wrap."""
    check_image(src)
    _no_dst(dst, "copyMakeBorder")
    if min(top, bottom, left, right) < 0:
        raise UnsupportedOperation(
            f"copyMakeBorder: borders must be >= 0, got {(top, bottom, left, right)}"
        )
    base = border_type_base(
        borderType,
        (BORDER_CONSTANT, BORDER_REPLICATE, BORDER_REFLECT, BORDER_WRAP, BORDER_REFLECT_101),
    )
    vals = scalar_values(value, channels(src))
    out = pad_nhwc(as_nhwc(src), int(top), int(bottom), int(left), int(right), base, vals)
    return like_input(out, src)


_ANY = frozenset({"uint8", "int8", "uint16", "int16", "int32", "float32", "float64"})
OPS = [
    op("cv2.flip", flip, dtypes=_ANY, fidelity=Fidelity.EXACT),
    op("cv2.transpose", transpose, dtypes=_ANY, fidelity=Fidelity.EXACT),
    op("cv2.rotate", rotate, dtypes=_ANY, fidelity=Fidelity.EXACT),
    op("cv2.copyMakeBorder", copyMakeBorder, dtypes=_ANY, fidelity=Fidelity.EXACT),
]

"""cv2 flips, transposes, rotations by 90 degrees and ``copyMakeBorder`` on torch, batch-first.

These are index permutations: results are bit-exact for every dtype cv2 takes. Plain torch
(``flip``, ``transpose``, ``rot90``, ``index_select``); kornia adds nothing here. Per sample:
``flip``'s code (a tensor [N] of codes) and ``copyMakeBorder``'s constant value ([N, 4]).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from codedag.backends.contract import OpSpec, Tolerance
from codedag.backends.ops.cv2._adapter import op
from codedag.backends.ops.cv2._common import (
    BORDER_CONSTANT,
    as_nhwc,
    border_reason,
    border_type_base,
    channels,
    check_image,
    is_int,
    like_input,
    no_output,
    pad_nhwc,
    saturate,
    scalar_reason,
    scalar_values,
)
from codedag.errors import UnsupportedOperation

ROTATE_90_CLOCKWISE = 0
ROTATE_180 = 1
ROTATE_90_COUNTERCLOCKWISE = 2


_SIGNED_VIEW = {torch.uint16: torch.int16, torch.uint32: torch.int32, torch.uint64: torch.int64}


def _flip(src: torch.Tensor, dims: list[int]) -> torch.Tensor:
    """``torch.flip`` for every dtype: torch's CPU kernel has no uint16/32/64, so those flip as
    the signed integers of their width (a bit-for-bit reinterpretation)."""
    signed = _SIGNED_VIEW.get(src.dtype)
    if signed is None:
        return torch.flip(src, dims)
    return torch.flip(src.view(signed), dims).view(src.dtype)


def _rot90(src: torch.Tensor, k: int) -> torch.Tensor:
    """``torch.rot90`` over (H, W) for every dtype (see :func:`_flip`), C-contiguous."""
    signed = _SIGNED_VIEW.get(src.dtype)
    if signed is None:
        return torch.rot90(src, k, dims=(1, 2)).contiguous()
    return torch.rot90(src.view(signed), k, dims=(1, 2)).contiguous().view(src.dtype)


def flip(src: torch.Tensor, flipCode: Any, dst: Any = None) -> torch.Tensor:
    """``cv2.flip``: 0 flips rows (vertical), > 0 columns (horizontal), < 0 both; ``flipCode``
    may be one code per sample (a tensor [N])."""
    check_image(src)
    no_output("flip", dst)
    if isinstance(flipCode, torch.Tensor) and flipCode.dim() == 1:
        codes = flipCode.to(src.device)
        n, h, w = src.shape[:3]
        y = torch.arange(h, device=src.device)
        x = torch.arange(w, device=src.device)
        rows = (codes <= 0).view(n, 1)
        cols = (codes != 0).view(n, 1)
        iy = torch.where(rows, h - 1 - y, y)  # (N, H)
        ix = torch.where(cols, w - 1 - x, x)  # (N, W)
        batch = torch.arange(n, device=src.device).view(n, 1, 1)
        return src[batch, iy.view(n, h, 1), ix.view(n, 1, w)]
    code = int(flipCode)
    dims = [1] if code == 0 else [2] if code > 0 else [1, 2]
    return _flip(src, dims)


def check_flip(src: object, flipCode: object, dst: object = None) -> str | None:
    """flipCode must be an integer."""
    return None if is_int(flipCode) else f"flipCode {flipCode!r} is not an integer"


def transpose(src: torch.Tensor, dst: object = None) -> torch.Tensor:
    """``cv2.transpose``: swap rows and columns of every image."""
    check_image(src)
    no_output("transpose", dst)
    return src.transpose(1, 2).contiguous()


def rotate(src: torch.Tensor, rotateCode: int, dst: object = None) -> torch.Tensor:
    """``cv2.rotate`` by 90, 180 or 270 degrees."""
    check_image(src)
    no_output("rotate", dst)
    code = int(rotateCode)
    if code == ROTATE_90_CLOCKWISE:
        return _rot90(src, -1)
    if code == ROTATE_180:
        return _flip(src, [1, 2])
    if code == ROTATE_90_COUNTERCLOCKWISE:
        return _rot90(src, 1)
    raise UnsupportedOperation(f"rotate: rotateCode {rotateCode} unknown; expected 0, 1 or 2")


def check_rotate(src: Any, rotateCode: Any, dst: Any = None) -> str | None:
    """rotateCode must be one of cv2's three codes."""
    if not is_int(rotateCode) or int(rotateCode) not in (0, 1, 2):
        return f"rotateCode {rotateCode!r} unknown; expected 0, 1 or 2"
    return None


def copyMakeBorder(
    src: torch.Tensor,
    top: int,
    bottom: int,
    left: int,
    right: int,
    borderType: int,
    dst: object = None,
    value: object = None,
) -> torch.Tensor:
    """``cv2.copyMakeBorder``: constant (per-channel value, or one value per sample as a tensor
    [N, k]), replicate, reflect(101), wrap. Always a new image, as cv2 returns."""
    check_image(src)
    no_output("copyMakeBorder", dst)
    base = border_type_base(borderType)
    x = as_nhwc(src)
    if isinstance(value, torch.Tensor) and value.dim() == 2:
        fill = torch.zeros((x.shape[0], max(4, x.shape[3])), dtype=torch.float64)
        fill[:, : value.shape[1]] = value.to(torch.float64).cpu()
        out = pad_nhwc(x, int(top), int(bottom), int(left), int(right), base, None)
        if base == BORDER_CONSTANT:
            inner = out[:, int(top) : int(top) + x.shape[1], int(left) : int(left) + x.shape[2]]
            kept = inner.clone()
            out[:] = (
                saturate(fill[:, : x.shape[3]], x.dtype).to(x.device).view(-1, 1, 1, x.shape[3])
            )
            out[:, int(top) : int(top) + x.shape[1], int(left) : int(left) + x.shape[2]] = kept
    else:
        vals = scalar_values(value, channels(src))
        out = pad_nhwc(x, int(top), int(bottom), int(left), int(right), base, vals)
    if out.data_ptr() == x.data_ptr():  # zero borders: cv2 still returns a copy
        out = out.clone()
    return like_input(out, src)


def check_copy_make_border(
    src: Any,
    top: Any,
    bottom: Any,
    left: Any,
    right: Any,
    borderType: Any,
    dst: Any = None,
    value: Any = None,
) -> str | None:
    """Integer borders >= 0, a supported border type, a cv2 Scalar value."""
    borders = (top, bottom, left, right)
    if not all(is_int(b) for b in borders) or min(int(b) for b in borders) < 0:
        return f"borders must be integers >= 0, got {borders}"
    return border_reason(borderType) or scalar_reason(value)


# int64 and uint64 arrays reach cv2 as int32 images (the binding converts them): left to cv2.
_ANY = frozenset(
    {"bool", "uint8", "int8", "uint16", "int16", "int32", "uint32", "float16", "float32", "float64"}
)
_EXACT = Tolerance(note="exact")


def _exact(name: str, backend: Callable[..., Any], reproduces: str, **quirks: Any) -> OpSpec:
    """A cv2 op of this module: exact, on every dtype above."""
    return op(name, backend, reproduces=reproduces, dtypes=_ANY, tolerance=_EXACT, **quirks)


_CHANNELS = (1, 2, 3, 4)
OPS = [
    _exact("cv2.flip", flip, "all codes", check=check_flip, per_sample={"flipCode": "[N]"}),
    _exact("cv2.transpose", transpose, "images of up to 4 channels", channels=_CHANNELS),
    _exact("cv2.rotate", rotate, "all codes", check=check_rotate, channels=_CHANNELS),
    _exact(
        "cv2.copyMakeBorder",
        copyMakeBorder,
        "constant (per-channel value), replicate, reflect, reflect101, wrap; any border size",
        check=check_copy_make_border,
        channels=_CHANNELS,
        per_sample={"value": "[N,k]"},
    ),
]

"""Shared helpers of the cv2 backends: constants, dtypes, cv2 rounding and saturation, borders.

Images are batch-first tensors ``(N, H, W)`` or ``(N, H, W, C)`` in cv2's dtype. Helpers here
work on the channels-last layout and never import cv2 (its flag values are part of its stable ABI).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

import numpy as np
import torch

from codedag.errors import UnsupportedOperation
from codedag.patching import original_of

# Border types (cv2.BORDER_*).
BORDER_CONSTANT = 0
BORDER_REPLICATE = 1
BORDER_REFLECT = 2
BORDER_WRAP = 3
BORDER_REFLECT_101 = 4
BORDER_TRANSPARENT = 5
BORDER_ISOLATED = 16
BORDER_DEFAULT = BORDER_REFLECT_101
INTERPOLATED_BORDERS = (
    BORDER_CONSTANT,
    BORDER_REPLICATE,
    BORDER_REFLECT,
    BORDER_WRAP,
    BORDER_REFLECT_101,
)
"""The borders :func:`torch_border` computes (every one but BORDER_TRANSPARENT)."""

# Depths (cv2.CV_*).
CV_8U, CV_8S, CV_16U, CV_16S, CV_32S, CV_32F, CV_64F = 0, 1, 2, 3, 4, 5, 6

DEPTH_TO_DTYPE: dict[int, torch.dtype] = {
    CV_8U: torch.uint8,
    CV_8S: torch.int8,
    CV_16U: torch.uint16,
    CV_16S: torch.int16,
    CV_32S: torch.int32,
    CV_32F: torch.float32,
    CV_64F: torch.float64,
}

_INT_RANGES: dict[torch.dtype, tuple[int, int]] = {
    torch.uint8: (0, 255),
    torch.int8: (-128, 127),
    torch.uint16: (0, 65535),
    torch.int16: (-32768, 32767),
    torch.int32: (-(2**31), 2**31 - 1),
    torch.uint32: (0, 2**32 - 1),
}


def check_image(
    src: object, name: str = "src", dtypes: Sequence[torch.dtype] | None = None
) -> None:
    """Raise ``UnsupportedOperation`` unless ``src`` is a batch tensor (N,H,W) or (N,H,W,C)."""
    if not isinstance(src, torch.Tensor):
        raise UnsupportedOperation(
            f"{name}: expected a torch.Tensor batch (N,H,W[,C]), got {type(src).__name__}"
        )
    if src.dim() not in (3, 4):
        raise UnsupportedOperation(
            f"{name}: expected shape (N,H,W) or (N,H,W,C), got {tuple(src.shape)}"
        )
    if dtypes is not None and src.dtype not in dtypes:
        raise UnsupportedOperation(
            f"{name}: dtype {src.dtype} is not supported here; expected one of {list(dtypes)}"
        )


def no_output(name: str, dst: object, param: str = "dst") -> None:
    """Raise ``UnsupportedOperation`` when an output array is passed (results are new arrays)."""
    if dst is not None:
        raise UnsupportedOperation(f"{name}: an output array {param} is not supported")


def channels(src: torch.Tensor) -> int:
    """Number of channels of a batch (1 for (N,H,W))."""
    return 1 if src.dim() == 3 else int(src.shape[3])


def as_nhwc(src: torch.Tensor) -> torch.Tensor:
    """View (N,H,W) as (N,H,W,1); (N,H,W,C) unchanged."""
    return src.unsqueeze(-1) if src.dim() == 3 else src


def like_input(out: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """Undo ``as_nhwc`` for single-channel inputs given as (N,H,W)."""
    return out.squeeze(-1) if src.dim() == 3 else out


def work_dtype(*dtypes: torch.dtype) -> torch.dtype:
    """Float dtype cv2 computes in: float64 when any input is float64, else float32."""
    return torch.float64 if torch.float64 in dtypes else torch.float32


def saturate(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``cv::saturate_cast``: floats just cast; integers round half to even (``cvRound``) and
    clamp. ``cvRound`` of NaN, of inf and of anything outside int32 is INT_MIN (the x86
    conversion's "integer indefinite"), so those become the type's minimum (0 for uint8)."""
    if dtype.is_floating_point:
        return x.to(dtype)
    if dtype == torch.bool:
        return x != 0
    lo, hi = _INT_RANGES[dtype]
    if x.dtype.is_floating_point:
        r = torch.round(x.double() if x.dtype != torch.float64 else x)
        x = torch.where((r >= -(2.0**31)) & (r <= 2.0**31 - 1), r, -(2.0**31))
    return x.clamp(lo, hi).to(dtype)


def to_numpy_matrix(m: object, shape: tuple[int, int], name: str) -> np.ndarray:
    """A small matrix argument (tensor, ndarray or nested list) as float64 NumPy of ``shape``."""
    if isinstance(m, torch.Tensor):
        m = m.detach().cpu().numpy()
    arr = np.asarray(m, dtype=np.float64)
    if arr.shape != shape:
        raise UnsupportedOperation(f"{name}: expected a {shape} matrix, got shape {arr.shape}")
    return arr


def scalar_values(value: Any, n_channels: int, broadcast: bool = False) -> list[float]:
    """A cv2 Scalar argument (number, tuple of up to 4, None) as one value per channel.

    A tuple gives channel values, missing ones 0. A plain number is ``Scalar(v, 0, 0, 0)`` (border
    values) unless ``broadcast`` (cv2 5's arithmetic applies it to every channel). Images of more
    than 4 channels repeat the 4 values (channel ``c`` takes value ``c % 4``), as cv2's remap
    fills its border.
    """
    if value is None:
        return [0.0] * n_channels
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().reshape(-1).tolist()
        if len(value) == 1:
            value = value[0]
    if isinstance(value, int | float | np.number):
        if broadcast:
            return [float(value)] * n_channels
        value = (float(value),)
    vals = [float(v) for v in value]
    if len(vals) > 4:
        raise UnsupportedOperation(f"a cv2 Scalar has at most 4 values, got {len(vals)}")
    vals = vals + [0.0] * (4 - len(vals))
    return [vals[c % 4] for c in range(n_channels)]


def border_type_base(border_type: int, allowed: Sequence[int] = INTERPOLATED_BORDERS) -> int:
    """Strip BORDER_ISOLATED (a whole image has no outside ROI) and check the type is allowed
    (by default: every border :func:`torch_border` computes)."""
    base = int(border_type) & ~BORDER_ISOLATED
    if base not in allowed:
        raise UnsupportedOperation(
            f"borderType {border_type} unsupported; expected one of {allowed}"
        )
    return base


def border_interpolate(p: np.ndarray, length: int, border_type: int) -> np.ndarray:
    """``cv::borderInterpolate`` on an integer array (:func:`torch_border` of its values); -1 marks
    constant-border positions."""
    if border_type not in INTERPOLATED_BORDERS:
        raise UnsupportedOperation(f"borderType {border_type} unsupported")
    index = torch.from_numpy(np.array(p, dtype=np.int64))
    return torch_border(index, length, border_type).numpy()


def torch_border(p: torch.Tensor, length: int, border: int) -> torch.Tensor:
    """``cv::borderInterpolate`` on a tensor of indices; -1 for constant-border positions."""
    inside = (p >= 0) & (p < length)
    if border == BORDER_CONSTANT:
        return torch.where(inside, p, torch.full_like(p, -1))
    if border == BORDER_REPLICATE:
        return p.clamp(0, length - 1)
    if border == BORDER_WRAP:
        return torch.remainder(p, length)
    if length == 1:
        return torch.zeros_like(p)
    delta = 1 if border == BORDER_REFLECT_101 else 0
    period = 2 * length - 2 * delta
    q = torch.remainder(p, period)
    return torch.where(q < length, q, period - q - (1 - delta))


@lru_cache(maxsize=256)
def _pad_index(length: int, before: int, after: int, border_type: int) -> tuple[int, ...]:
    return tuple(border_interpolate(np.arange(-before, length + after), length, border_type))


@lru_cache(maxsize=64)
def _padded_pixels(
    h: int, w: int, pads: tuple[int, int, int, int], border_type: int, dev: torch.device
) -> torch.Tensor:
    """Each pixel of a padded ``h x w`` image as its source pixel's flat index (not constant)."""
    top, bottom, left, right = pads
    iy = np.asarray(_pad_index(h, top, bottom, border_type), np.int64)
    ix = np.asarray(_pad_index(w, left, right, border_type), np.int64)
    return torch.as_tensor((iy[:, None] * w + ix[None, :]).reshape(-1), device=dev)


def pad_gather_nhwc(
    x: torch.Tensor, top: int, bottom: int, left: int, right: int, border_type: int
) -> torch.Tensor:
    """:func:`pad_nhwc` for every border type but constant, as one gather of whole pixels
    (the index made once per size, pads and border)."""
    n, h, w, c = x.shape
    index = _padded_pixels(h, w, (top, bottom, left, right), border_type, x.device)
    out = x.reshape(n, h * w, c).index_select(1, index)
    return out.view(n, h + top + bottom, w + left + right, c)


def pad_nhwc(
    x: torch.Tensor,
    top: int,
    bottom: int,
    left: int,
    right: int,
    border_type: int,
    value: Sequence[float] | None = None,
) -> torch.Tensor:
    """Pad an (N,H,W,C) tensor as cv2 does (any pad size, every border type but transparent).

    The image is copied once into the middle of the output; only the border pixels are
    gathered (``index_select`` of the few border columns and rows)."""
    if top == bottom == left == right == 0:
        return x
    n, h, w, c = x.shape
    out = torch.empty((n, h + top + bottom, w + left + right, c), dtype=x.dtype, device=x.device)
    if border_type == BORDER_CONSTANT:
        vals = torch.tensor(list(value or [0.0] * c), dtype=torch.float64)
        out[:] = saturate(vals, x.dtype).to(x.device)
        out[:, top : top + h, left : left + w] = x
        return out
    ix = _pad_index(w, left, right, border_type)
    iy = _pad_index(h, top, bottom, border_type)
    middle = out[:, top : top + h]
    middle[:, :, left : left + w] = x
    for start, stop in ((0, left), (left + w, left + w + right)):
        if stop > start:
            cols = torch.tensor(ix[start:stop], device=x.device)
            middle[:, :, start:stop] = x.index_select(2, cols)
    for start, stop in ((0, top), (top + h, top + h + bottom)):
        if stop > start:
            rows = torch.tensor([iy[i] + top for i in range(start, stop)], device=x.device)
            out[:, start:stop] = out.index_select(1, rows)
    return out


# -- declared checks: helpers on the library's own arguments ---------------------------------


def is_int(value: object) -> bool:
    """A Python or NumPy integer (not a bool)."""
    kind = type(value)
    if kind is int:  # the usual case first: these checks run on every recorded call
        return True
    return isinstance(value, _INTEGERS) and kind is not bool


def is_number(value: object) -> bool:
    """A Python or NumPy real number (not a bool)."""
    kind = type(value)
    if kind is int or kind is float:
        return True
    return isinstance(value, _NUMBERS) and kind is not bool


_INTEGERS = (int, np.integer)
_NUMBERS = (int, float, np.integer, np.floating)


def int_pair(value: object) -> tuple[int, int] | None:
    """A cv2 Size or Point argument (a tuple or list of two integers), else ``None``."""
    if (type(value) is tuple or isinstance(value, tuple | list)) and len(value) == 2:
        first, second = value
        if is_int(first) and is_int(second):
            return int(first), int(second)
    return None


def channels_of(src: np.ndarray) -> int:
    """Channels of a cv2 image array: (H, W) is 1, (H, W, C) is C."""
    return 1 if src.ndim < 3 else int(src.shape[2])


def mat_shape(src: np.ndarray) -> tuple[int, ...]:
    """The shape cv2 sees: ``(H, W, 1)`` is the one-channel ``(H, W)``."""
    return src.shape[:2] if src.ndim == 3 and src.shape[2] == 1 else src.shape


def finite(src: np.ndarray) -> bool:
    """Whether a float image holds only finite values (one fast pass: NaN and inf reach the
    channel sums)."""
    if src.dtype.kind != "f":
        return True
    if channels_of(src) <= 4 and src.dtype in (np.float32, np.float64):
        return bool(np.isfinite(cv2_own("sumElems")(src)).all())
    with np.errstate(all="ignore"):
        return bool(np.isfinite(src.sum(dtype=np.float64)))


def border_reason(border_type: Any, allowed: Sequence[int] = INTERPOLATED_BORDERS) -> str | None:
    """Why a borderType argument is not one of ``allowed`` (BORDER_ISOLATED stripped; by
    default every border :func:`torch_border` computes)."""
    if not is_int(border_type):
        return f"borderType {border_type!r} is not an integer"
    if int(border_type) & ~BORDER_ISOLATED not in allowed:
        return f"borderType {border_type} unsupported; expected one of {tuple(allowed)}"
    return None


def scalar_reason(value: object) -> str | None:
    """Why a cv2 Scalar argument (a number, a tuple of up to 4 numbers, None) is not one."""
    if value is None or is_number(value):
        return None
    if isinstance(value, tuple | list) and len(value) <= 4 and all(is_number(v) for v in value):
        return None
    return f"a cv2 Scalar is a number or up to 4 numbers, got {value!r}"


def cv2_own(name: str) -> Any:
    """cv2's own function ``name``, even while a plan replaces it: what the backends ask cv2
    (a probe of its rounding, a check of its input) must never run a replacement, which may be
    recording the very call being computed."""
    import cv2

    return original_of(getattr(cv2, name))

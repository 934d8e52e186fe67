"""What the adapters share: refusal reasons for array arguments, results mapped tensor by tensor,
and the fast paths' tests of values passed on as they are and zero-copy tensors of arrays."""

from __future__ import annotations

import numbers
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import NOT_TAKEN, OpSpec
from codedag.backends.device_values import CONVERTIBLE, CallValues, accepted_dtypes

MISSING = object()
"""An argument the call does not pass."""


def describe(value: object) -> str:
    """A short description of a value for refusal reasons (``uint8 array (4, 5, 3)``)."""
    if isinstance(value, np.ndarray):
        return f"{value.dtype} array {value.shape}"
    if isinstance(value, torch.Tensor):
        return f"torch.Tensor {tuple(value.shape)}"
    return type(value).__name__


def array_refusal(
    name: str, value: np.ndarray, spec: OpSpec, ndims: tuple[int, ...], channel_axis: bool
) -> str | None:
    """Why an array argument is outside ``spec``'s declared dtypes, ranks, channels or sizes."""
    quirks = spec.quirks
    if value.dtype not in accepted_dtypes(quirks.dtypes):
        dtypes = quirks.dtypes if quirks.dtypes is not None else CONVERTIBLE
        return f"{name}: dtype {value.dtype.str} is not supported; expected {sorted(dtypes)}"
    if ndims and value.ndim not in ndims:
        return f"{name}: {value.ndim}-d array; expected {' or '.join(map(str, ndims))} dims"
    if quirks.channels is not None and channel_axis:
        cn = 1 if value.ndim < 3 else int(value.shape[2])
        if cn not in quirks.channels:
            return f"{name}: {cn} channels; expected {', '.join(map(str, quirks.channels))}"
    if value.size == 0 and not quirks.empty:
        return f"{name}: empty array {value.shape}"
    return None


def results(result: object, leaf: Callable[[torch.Tensor], Any]) -> Any:
    """Apply ``leaf`` to every tensor of a result (tuples and lists keep their type)."""
    if isinstance(result, torch.Tensor):
        return leaf(result)
    if isinstance(result, tuple | list):
        return type(result)(results(r, leaf) for r in result)
    return result


# Values ValueConverter.to_device converts (lists and tuples only when they hold arrays).
_CONVERTED = (np.ndarray, torch.Tensor, list, tuple)


def unconverted(value: object) -> bool:
    """Whether ``ValueConverter.to_device`` passes ``value`` on as it is."""
    return not isinstance(value, _CONVERTED) or (
        isinstance(value, list | tuple) and not (value and isinstance(value[0], np.ndarray))
    )


def shared_tensor(array: np.ndarray, call: CallValues) -> Any:
    """A writeable array with non-negative strides as a tensor sharing its memory (recorded in
    ``call``), else :data:`NOT_TAKEN` (the general path copies such arrays first)."""
    if not array.flags.writeable:
        return NOT_TAKEN
    try:
        tensor = torch.from_numpy(array)
    except ValueError:  # negative strides
        return NOT_TAKEN
    call.sources.append((tensor, array))
    return tensor


def is_scalar_like(value: object) -> bool:
    """Whether ``value`` is a number or a tuple of numbers (cv2's Scalar operands)."""
    if isinstance(value, numbers.Number | np.generic):
        return True
    return isinstance(value, tuple) and all(isinstance(v, numbers.Number) for v in value)

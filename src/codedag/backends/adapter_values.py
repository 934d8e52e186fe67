"""What the adapters share: refusal reasons for array arguments, results mapped tensor by tensor,
the conversion of a call value by value (:class:`ValueAdapter`), and the fast paths' tests of
values passed on as they are and zero-copy tensors of arrays."""

from __future__ import annotations

import numbers
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import NOT_TAKEN, OpSpec
from codedag.backends.device_values import (
    CONVERTIBLE,
    CallValues,
    ValueConverter,
    accepted_dtypes,
)

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


def results(
    result: object,
    leaf: Callable[[Any], Any],
    leaf_types: type | tuple[type, ...] = torch.Tensor,
) -> Any:
    """Apply ``leaf`` to every tensor (every value of ``leaf_types``) of a result (tuples and
    lists keep their type)."""
    if isinstance(result, leaf_types):
        return leaf(result)
    if isinstance(result, tuple | list):
        return type(result)(results(r, leaf, leaf_types) for r in result)
    return result


class ValueAdapter:
    """The conversions of an :class:`~.contract.Adapter` that treats a call value by value.

    ``to_backend`` converts every argument with ``backend_value`` and then asks
    ``backend_state`` for the state; ``to_library`` applies ``library_leaf`` to every tensor
    (every value of ``leaf_types``) of the result.
    """

    leaf_types: type | tuple[type, ...] = torch.Tensor

    def backend_value(self, converter: ValueConverter, call: CallValues) -> Callable[[Any], Any]:
        """How one argument reaches the backend: arrays and tensors on the device."""
        to_device = converter.to_device
        return lambda value: to_device(value, call)

    def backend_state(
        self,
        spec: OpSpec,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        backend_args: list[Any],
        backend_kwargs: dict[str, Any],
    ) -> Any:
        """The state for ``to_library`` (none by default); may change the backend arguments."""
        return None

    def library_leaf(
        self, spec: OpSpec, converter: ValueConverter, call: CallValues, state: object
    ) -> Callable[[Any], Any]:
        """What one result tensor becomes for the library."""
        raise NotImplementedError

    def to_backend(
        self,
        spec: OpSpec,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        converter: ValueConverter,
        call: CallValues,
    ) -> tuple[list[Any], dict[str, Any], Any]:
        """Every argument through ``backend_value``, then the state of ``backend_state``."""
        convert = self.backend_value(converter, call)
        backend_args = [convert(v) for v in args]
        backend_kwargs = {k: convert(v) for k, v in kwargs.items()} if kwargs else {}
        state = self.backend_state(spec, args, kwargs, backend_args, backend_kwargs)
        return backend_args, backend_kwargs, state

    def to_library(
        self,
        spec: OpSpec,
        result: object,
        converter: ValueConverter,
        call: CallValues,
        state: object,
    ) -> Any:
        """Every result tensor (value of ``leaf_types``) through ``library_leaf``."""
        return results(result, self.library_leaf(spec, converter, call, state), self.leaf_types)


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

"""Generic adapters: library values to backend values and back, for arrays and batches.

Each ``codedag.backends.ops.<library>`` package picks one adapter (:class:`~.contract.Adapter`):

* :class:`ArrayAdapter`: NumPy semantics. Every array argument becomes a tensor of its own shape;
  results come back as arrays (0-d results as NumPy scalars).
* :class:`BatchAdapter`: batch-first backends (cv2 images, librosa signals). The data arguments get
  a leading batch axis of one and results lose it. cv2 sees an ``(H, W, 1)`` array as a
  one-channel image, exactly as an ``(H, W)`` one, and returns one-channel results as ``(H, W)``;
  ``squeeze_channel`` reproduces that.
* :class:`TensorAdapter`: torch functions called on CPU tensors: tensors move to the device and the
  result returns to the caller's device.

The PIL adapter lives with the PIL backends (:mod:`codedag.backends.ops.pil`), whose image batch
type it converts to.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from typing import Any

import numpy as np
import torch

from codedag.backends.adapter_values import (
    MISSING,
    ValueAdapter,
    array_refusal,
    describe,
    is_scalar_like,
    results,
    shared_tensor,
    unconverted,
)
from codedag.backends.contract import NOT_TAKEN, FastPath, OpSpec, Strategy
from codedag.backends.device_values import (
    CallValues,
    ValueConverter,
    accepted_dtypes,
    fortran_only,
    keep_order,
    numpy_scalar,
)
from codedag.backends.tensor_adapter import TensorAdapter
from codedag.errors import UnsupportedOperation

__all__ = ["ArrayAdapter", "BatchAdapter", "TensorAdapter", "array_refusal", "describe", "results"]


class ArrayAdapter(ValueAdapter):
    """NumPy semantics: arrays in and out as they are, 0-d results as NumPy scalars.

    Args:
        library: the library name.
        default_order: layout of returned arrays unless an op declares one (``K``: the
            backend's strides, as NumPy keeps them).
    """

    default_strategy = Strategy.MOVE_ONLY

    def __init__(self, library: str = "numpy", default_order: str = "K") -> None:
        self.library = library
        self.default_order = default_order

    def data_positions(self, spec: OpSpec) -> tuple[tuple[int, str], ...]:
        """Every parameter may hold an array: they are found by type, not by name."""
        return ()

    def refuse(self, spec: OpSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
        """Arrays (and lists or tuples of arrays) of a dtype the op does not declare."""
        quirks = spec.quirks
        accepted = accepted_dtypes(quirks.dtypes)
        empty = quirks.empty
        for index, value in enumerate(args):
            # the common case in one test (the same conditions as array_refusal's here)
            if isinstance(value, np.ndarray) and value.dtype in accepted and (empty or value.size):
                continue
            reason = self._refuse_value(spec, f"argument {index}", value)
            if reason is not None:
                return reason
        for key, value in kwargs.items():
            reason = self._refuse_value(spec, key, value)
            if reason is not None:
                return reason
        return None

    def _refuse_value(self, spec: OpSpec, name: str, value: object) -> str | None:
        if isinstance(value, np.ndarray):
            return array_refusal(name, value, spec, (), channel_axis=False)
        if isinstance(value, list | tuple) and value and isinstance(value[0], np.ndarray):
            for item in value:
                if isinstance(item, np.ndarray):
                    reason = array_refusal(name, item, spec, (), channel_axis=False)
                    if reason is not None:
                        return reason
        return None

    def backend_state(
        self,
        spec: OpSpec,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        backend_args: list[Any],
        backend_kwargs: dict[str, Any],
    ) -> Any:
        """Whether the first array is Fortran-ordered (for ops declaring ``order="A"``, whose
        results follow it); the array arguments (for ops declaring ``order="ufunc"``, whose
        results are laid out after them)."""
        if spec.quirks.order == "A":
            first = next((v for v in args if isinstance(v, np.ndarray)), None)
            return first is not None and first.ndim > 1 and fortran_only(first)
        if spec.quirks.order == "ufunc":
            return [v for v in (*args, *kwargs.values()) if isinstance(v, np.ndarray)]
        return False

    def library_leaf(
        self, spec: OpSpec, converter: ValueConverter, call: CallValues, state: object
    ) -> Callable[[Any], Any]:
        """Tensors back as arrays of the declared layout (``A``: Fortran order after a
        Fortran-ordered first array, else C order; ``ufunc``: NumPy's order K
        after the array arguments); 0-d ones as NumPy scalars."""
        order = spec.quirks.order or self.default_order
        inputs = state if order == "ufunc" and isinstance(state, list) else None
        if order == "A":
            order = "F" if state else "C"
        elif order == "ufunc":
            order = "K"

        def leaf(tensor: torch.Tensor) -> Any:
            array = converter.tensor_to_array(tensor, order, call)
            if inputs is not None:
                array = keep_order(array, inputs)
            return numpy_scalar(array) if array.ndim == 0 else array

        return leaf

    def fast_path(self, spec: OpSpec) -> FastPath:
        """Calls whose values are arrays of an accepted dtype (writeable, non-negative strides,
        exact ``ndarray``) and values that are passed on as they are: one pass of checks and
        conversions, then ``to_library`` (a single tensor result inline)."""
        quirks = spec.quirks
        accepted = accepted_dtypes(quirks.dtypes)
        empty = quirks.empty
        declared = quirks.order or self.default_order
        from_numpy = torch.from_numpy
        ndarray = np.ndarray
        tensor_type = torch.Tensor
        to_library = self.to_library

        def convert(value: object, call: CallValues) -> Any:
            if type(value) is ndarray:
                if value.dtype not in accepted or not (empty or value.size):
                    return NOT_TAKEN
                return shared_tensor(value, call)
            return value if unconverted(value) else NOT_TAKEN

        def call_backend(
            backend: Callable[..., Any],
            args: tuple[Any, ...],
            kwargs: Mapping[str, Any],
            converter: ValueConverter,
        ) -> Any:
            call = CallValues()
            sources = call.sources
            backend_args = []
            for value in args:
                # convert() inline for the usual argument, an accepted array
                if (
                    type(value) is ndarray
                    and value.dtype in accepted
                    and (empty or value.size)
                    and value.flags.writeable
                ):
                    try:
                        tensor = from_numpy(value)
                    except ValueError:  # negative strides
                        return NOT_TAKEN
                    sources.append((tensor, value))
                    backend_args.append(tensor)
                    continue
                value = convert(value, call)
                if value is NOT_TAKEN:
                    return NOT_TAKEN
                backend_args.append(value)
            fortran = False
            if declared == "A" and sources:  # the first positional array decides
                first = sources[0][1]
                fortran = first.ndim > 1 and fortran_only(first)
            backend_kwargs = {}
            if kwargs:
                for key, value in kwargs.items():
                    value = convert(value, call)
                    if value is NOT_TAKEN:
                        return NOT_TAKEN
                    backend_kwargs[key] = value
            result = backend(*backend_args, **backend_kwargs) if kwargs else backend(*backend_args)
            ufunc = declared == "ufunc"
            if type(result) is tensor_type:
                order = ("F" if fortran else "C") if declared == "A" else declared
                order = "K" if ufunc else order
                for source, array in sources:
                    if result is source:  # the backend returned its input: the library copies
                        array = np.array(array, order="F" if order == "F" else "C", copy=True)
                        break
                else:
                    array = converter.tensor_to_array(result, order, call)
                if ufunc:
                    array = keep_order(array, [a for _, a in sources])
                output = numpy_scalar(array) if array.ndim == 0 else array
            else:
                inputs = [a for _, a in sources] if ufunc else fortran
                output = to_library(spec, result, converter, call, inputs)
            if call.staging:  # results left the host's memory
                converter.finish(call)
            return output

        return call_backend


@dataclass(eq=False)
class BatchAdapter(ValueAdapter):
    """Batch-first backends: data arguments get a batch axis of one, results lose it.

    Args:
        library: the library name.
        params: names of the data parameters (images, signals) in the library's signature.
        ndims: ranks of data arrays the library takes (others are refused).
        first_is_data: without a data parameter name, the first parameter is the data.
        squeeze_channel: an ``(H, W, 1)`` array is the one-channel image ``(H, W)`` (cv2).
        channel_axis: the third axis of a data array is its channels (declared ``channels``).
        scalar: how a 0-d result reaches user code (a Python float for cv2).
        default_order: layout of returned arrays unless an op declares one.
        scalar_params: data parameters that may also be numbers or tuples of numbers (cv2's
            Scalar operands).
    """

    default_strategy = Strategy.STANDARD_OP

    library: str
    params: frozenset[str]
    ndims: tuple[int, ...]
    _: KW_ONLY
    first_is_data: bool = True
    squeeze_channel: bool = False
    channel_axis: bool = False
    scalar: Callable[[np.ndarray], Any] = numpy_scalar
    default_order: str = "C"
    scalar_params: frozenset[str] = frozenset()
    _positions: dict[Any, tuple[tuple[int, str], ...]] = field(
        default_factory=dict, init=False, repr=False
    )

    def data_positions(self, spec: OpSpec) -> tuple[tuple[int, str], ...]:
        """(position, name) of the data parameters (position -1: keyword-only)."""
        key = (spec.name, spec.positional_names, spec.backend)
        cached = self._positions.get(key)
        if cached is not None:
            return cached
        names = spec.positional_names
        found = tuple((i, p) for i, p in enumerate(names) if p in self.params)
        if not found and self.first_is_data and names:
            found = ((0, names[0]),)
        if not found and spec.backend is not None:  # keyword-only data (librosa's y=, S=)
            try:
                keywords = list(inspect.signature(spec.backend).parameters)
            except (TypeError, ValueError):
                keywords = []
            found = tuple((-1, p) for p in keywords if p in self.params)
        self._positions[key] = found
        return found

    @staticmethod
    def _value(position: int, name: str, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> Any:
        if 0 <= position < len(args):
            return args[position]
        return kwargs.get(name, MISSING)

    def refuse(self, spec: OpSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
        """Data arguments that are not arrays of the declared dtypes, ranks, channels, sizes."""
        for position, name in self.data_positions(spec):
            value = self._value(position, name, args, kwargs)
            if value is MISSING or value is None:
                continue
            if isinstance(value, np.ndarray):
                reason = array_refusal(name, value, spec, self.ndims, self.channel_axis)
                if reason is not None:
                    return reason
            elif name in self.scalar_params and is_scalar_like(value):
                continue
            else:
                return f"{name}: {describe(value)}; {self.library} takes NumPy arrays here"
        return None

    def _batch(self, value: object) -> tuple[Any, bool]:
        if not isinstance(value, torch.Tensor) or value.dim() not in self.ndims:
            return value, False
        if self.squeeze_channel and value.dim() == 3 and value.shape[2] == 1:
            value = value[..., 0]
        return value.unsqueeze(0), True

    def backend_state(
        self,
        spec: OpSpec,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        backend_args: list[Any],
        backend_kwargs: dict[str, Any],
    ) -> Any:
        """Data arguments as batches of one. The state: whether batched."""
        batched = False
        for position, name in self.data_positions(spec):
            if 0 <= position < len(backend_args):
                backend_args[position], did = self._batch(backend_args[position])
            elif name in backend_kwargs:
                backend_kwargs[name], did = self._batch(backend_kwargs[name])
            else:
                continue
            batched |= did
        return batched

    def library_leaf(
        self, spec: OpSpec, converter: ValueConverter, call: CallValues, state: object
    ) -> Callable[[Any], Any]:
        """Results without their batch axis, as arrays of the declared layout or scalars."""
        order = spec.quirks.order or self.default_order

        def leaf(tensor: torch.Tensor) -> Any:
            if state:
                if tensor.dim() == 0 or tensor.shape[0] != 1:
                    raise UnsupportedOperation(
                        f"{spec.name}: backend returned shape {tuple(tensor.shape)} for a batch "
                        "of one"
                    )
                tensor = tensor[0]
            array = converter.tensor_to_array(tensor, order, call)
            return self.scalar(array) if array.ndim == 0 else array

        return leaf

    def fast_path(self, spec: OpSpec) -> FastPath | None:
        """Calls whose data arguments are exact arrays the op declares (dtype, rank, channels,
        size), ``None`` or declared scalars, and whose other values are arrays of a convertible
        dtype or values passed on as they are: one pass of checks and conversions (batches of
        one), then ``to_library``. ``None`` for adapters without declared ranks."""
        if not self.ndims:
            return None
        positions = self.data_positions(spec)
        quirks = spec.quirks
        accepted = accepted_dtypes(quirks.dtypes)
        convertible = accepted_dtypes(None)
        empty, ndims, squeeze = quirks.empty, self.ndims, self.squeeze_channel
        channels = quirks.channels if self.channel_axis else None
        data_at = {position: name for position, name in positions if position >= 0}
        data_names = frozenset(name for _position, name in positions)
        scalar_params = self.scalar_params
        to_library = self.to_library
        ndarray = np.ndarray
        tensor_type = torch.Tensor

        def data(value: object, name: str, call: CallValues) -> Any:
            if type(value) is ndarray:
                ndim = value.ndim
                if (
                    value.dtype not in accepted
                    or ndim not in ndims
                    or not (empty or value.size)
                    or (
                        channels is not None and (value.shape[2] if ndim > 2 else 1) not in channels
                    )
                ):
                    return NOT_TAKEN
                tensor = shared_tensor(value, call)
                if tensor is NOT_TAKEN:
                    return NOT_TAKEN
                if squeeze and ndim == 3 and value.shape[2] == 1:
                    tensor = tensor[..., 0]
                return tensor.unsqueeze(0)
            if value is None or (name in scalar_params and is_scalar_like(value)):
                return value
            return NOT_TAKEN

        def other(value: object, call: CallValues) -> Any:
            if type(value) is ndarray:
                return shared_tensor(value, call) if value.dtype in convertible else NOT_TAKEN
            return value if unconverted(value) else NOT_TAKEN

        def call_backend(
            backend: Callable[..., Any],
            args: tuple[Any, ...],
            kwargs: Mapping[str, Any],
            converter: ValueConverter,
        ) -> Any:
            call = CallValues()
            batched = False  # whether a data array became a batch of one
            backend_args = []
            for index, value in enumerate(args):
                name = data_at.get(index)
                if name is None:
                    value = other(value, call)
                else:
                    value = data(value, name, call)
                    batched = batched or type(value) is tensor_type
                if value is NOT_TAKEN:
                    return NOT_TAKEN
                backend_args.append(value)
            backend_kwargs = {}
            if kwargs:
                for key, value in kwargs.items():
                    if key in data_names:
                        value = data(value, key, call)
                        batched = batched or type(value) is tensor_type
                    else:
                        value = other(value, call)
                    if value is NOT_TAKEN:
                        return NOT_TAKEN
                    backend_kwargs[key] = value
            result = backend(*backend_args, **backend_kwargs) if kwargs else backend(*backend_args)
            output = to_library(spec, result, converter, call, batched)
            if call.staging:  # results left the host's memory
                converter.finish(call)
            return output

        return call_backend

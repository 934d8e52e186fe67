"""The migrated path of one call: convert the inputs, adapt them per strategy, run the backend,
convert the outputs back to what the library returns.

:class:`Executor` does the work the seed's ``_execute_move_only`` / ``_execute_standard_op`` /
``_execute_factory_op`` describe (§4.2); :class:`~codedag.migrate.wrapper.UniversalWrapper` decides
whether a call takes this path and falls back to the original on any exception raised here.
"""

from __future__ import annotations

import sys
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from codedag.errors import UnsupportedOperation
from codedag.migrate.registry import DEVICE, OpSpec, Strategy
from codedag.migrate.values import CallValues, ValueConverter, numpy_scalar

FACTORY_CACHE_SIZE = 64
"""Transforms a FactoryOp keeps per function (least recently built dropped first)."""


class Executor:
    """Runs one library function's backend per its :class:`OpSpec`.

    Args:
        spec: the registry's spec.
        original: the library function (the backend of torch MoveOnly specs).
        converters: value converters by device, shared by every wrapper of a migrator.
    """

    def __init__(
        self,
        spec: OpSpec,
        original: Callable[..., Any],
        converters: Mapping[str, ValueConverter],
    ) -> None:
        self.spec = spec
        self.original = original
        self.converters = converters
        self.factories: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._factory = spec.strategy is Strategy.FACTORY_OP
        self._adapting = bool(spec.value_maps or spec.renames or spec.inject_kwargs)

    def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Any:
        """Run the backend on ``device`` for one library call; exceptions propagate."""
        spec = self.spec
        if kwargs:
            for name in spec.unsupported_kwargs:
                if name in kwargs:
                    if kwargs[name] is not None:
                        raise UnsupportedOperation(f"{name}= writes into a caller's buffer")
                    kwargs = {k: v for k, v in kwargs.items() if k != name}
        converter = self.converters.get(device)
        if converter is None:
            converter = self.converters[device] = ValueConverter(device)  # type: ignore[index]
        call = CallValues()
        try:
            if self._factory:
                result, batched = self._factory_call(args, kwargs, converter, call, device)
            else:
                new_args, new_kwargs, batched = self._convert_inputs(args, kwargs, converter, call)
                if self._adapting:
                    new_args, new_kwargs = self._adapt(new_args, new_kwargs, device)
                backend = spec.backend if spec.backend is not None else self.original
                result = backend(*new_args, **new_kwargs)
                for index in spec.inplace_args:
                    _copy_back(args[index], new_args[index])
            return self._to_host(result, converter, call, batched, args, kwargs)
        finally:
            converter.finish(call)

    def _convert_inputs(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        converter: ValueConverter,
        call: CallValues,
    ) -> tuple[list[Any], dict[str, Any], bool]:
        batch = self.spec.batch
        to_device = converter.to_device
        if batch is None:  # MoveOnly: convert, nothing else
            return (
                [to_device(v, call) for v in args],
                {k: to_device(v, call) for k, v in kwargs.items()},
                False,
            )
        batched = False
        wrap = self._pil_batch_type()
        new_args = []
        for index, value in enumerate(args):
            converted = converter.to_device(value, call)
            if index in batch.positions:
                converted, did = _add_batch_axis(converted, batch.ndims)
                batched |= did
                if did and wrap is not None and _is_pil_image(value):
                    converted = wrap(converted, value.mode)
            new_args.append(converted)
        new_kwargs = {}
        for key, value in kwargs.items():
            converted = converter.to_device(value, call)
            if key in batch.params:
                converted, did = _add_batch_axis(converted, batch.ndims)
                batched |= did
                if did and wrap is not None and _is_pil_image(value):
                    converted = wrap(converted, value.mode)
            new_kwargs[key] = converted
        return new_args, new_kwargs, batched

    def _pil_batch_type(self) -> Any:
        """``PILBatch`` of the PIL backends (images travel with their mode), if this spec uses it."""
        if not self.spec.pil_batch:
            return None
        from codedag.migrate.ops.pil import PILBatch

        return PILBatch

    def _adapt(
        self, args: list[Any], kwargs: dict[str, Any], device: str
    ) -> tuple[list[Any], dict[str, Any]]:
        spec = self.spec
        if spec.value_maps:
            for index, value in enumerate(args):
                if index < len(spec.positional_names):
                    table = spec.value_maps.get(spec.positional_names[index])
                    if table is not None:
                        args[index] = _mapped(spec.name, spec.positional_names[index], table, value)
            for key, value in kwargs.items():
                table = spec.value_maps.get(key)
                if table is not None:
                    kwargs[key] = _mapped(spec.name, key, table, value)
        if spec.renames:
            kwargs = {spec.renames.get(k, k): v for k, v in kwargs.items()}
        for key, value in spec.inject_kwargs.items():
            kwargs[key] = torch.device(device) if value is DEVICE else value
        return args, kwargs

    def _factory_call(
        self,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        converter: ValueConverter,
        call: CallValues,
        device: str,
    ) -> tuple[Any, bool]:
        spec = self.spec
        names = spec.positional_names
        if len(args) > len(names):
            raise UnsupportedOperation(
                f"{len(args)} positional arguments; expected <= {len(names)}"
            )
        bound = dict(zip(names, args))
        bound.update(kwargs)
        data = {k: v for k, v in bound.items() if k in spec.data_params}
        config = {k: v for k, v in bound.items() if k not in spec.data_params}
        if spec.config_key is not None:
            key: Any = (device, spec.config_key(config))
        else:
            key = (device, *sorted((k, _hashable(v)) for k, v in config.items()))
        transform = self.factories.get(key)
        if transform is None:
            transform = spec.backend(**config, device=torch.device(device))  # type: ignore[misc]
            with self._lock:
                self.factories[key] = transform
                while len(self.factories) > FACTORY_CACHE_SIZE:
                    self.factories.popitem(last=False)
        tensors = []
        batched = False
        wrap = self._pil_batch_type()
        for name in spec.data_params:
            if name not in data:
                continue
            value = converter.to_device(data[name], call)
            if spec.batch is not None:
                value, did = _add_batch_axis(value, spec.batch.ndims)
                batched |= did
                if did and wrap is not None and _is_pil_image(data[name]):
                    value = wrap(value, data[name].mode)
            tensors.append(value)
        return transform(*tensors), batched

    def _to_host(
        self,
        result: Any,
        converter: ValueConverter,
        call: CallValues,
        batched: bool,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        spec = self.spec
        if isinstance(result, torch.Tensor):
            if batched:
                if result.dim() == 0 or result.shape[0] != 1:
                    raise UnsupportedOperation(
                        f"backend returned shape {tuple(result.shape)} for a batch of one"
                    )
                result = result[0]
            if spec.library == "torch":
                return result.to(call.torch_device or "cpu")
            if spec.library == "pil" and call.pil_modes and result.dim() in (2, 3):
                return self._to_pil(result, converter, call, args, kwargs)
            array = converter.tensor_to_array(result, spec.output_order)
            if array.ndim == 0:
                return array.item() if spec.library == "cv2" else numpy_scalar(array)
            return array
        if isinstance(result, tuple | list):
            return type(result)(
                self._to_host(r, converter, call, batched, args, kwargs) for r in result
            )
        if spec.pil_batch and isinstance(getattr(result, "data", None), torch.Tensor):
            return self._batch_to_pil(result, converter, batched)
        return result

    def _batch_to_pil(self, result: Any, converter: ValueConverter, batched: bool) -> Any:
        """A ``PILBatch`` of one image back to a ``PIL.Image.Image`` of its mode."""
        from PIL import Image

        data = result.data
        if batched:
            if data.shape[0] != 1:
                raise UnsupportedOperation(f"backend returned {data.shape[0]} images for one")
            data = data[0]
        image = Image.fromarray(converter.tensor_to_array(data, "C"))
        if image.mode != result.mode:
            raise UnsupportedOperation(f"result has PIL mode {image.mode!r}, not {result.mode!r}")
        return image

    def _to_pil(
        self,
        result: torch.Tensor,
        converter: ValueConverter,
        call: CallValues,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        from PIL import Image

        mode = call.pil_modes[0]
        param = self.spec.pil_mode_param
        if param is not None:
            names = self.spec.positional_names
            position = names.index(param) if param in names else -1
            if param in kwargs:
                mode = kwargs[param]
            elif 0 <= position < len(args):
                mode = args[position]
        image = Image.fromarray(converter.tensor_to_array(result, "C"))
        if image.mode != mode:
            raise UnsupportedOperation(f"result has PIL mode {image.mode!r}, expected {mode!r}")
        return image

    # -- statistics --------------------------------------------------------------------------


def _is_pil_image(value: Any) -> bool:
    module = sys.modules.get("PIL.Image")
    return module is not None and isinstance(value, module.Image)


def _copy_back(target: Any, tensor: Any) -> None:
    """Write an in-place result back into the caller's array unless they share memory."""
    if not isinstance(target, np.ndarray) or not isinstance(tensor, torch.Tensor):
        return
    if tensor.device.type == "cpu" and tensor.data_ptr() == target.ctypes.data:
        return
    np.copyto(target, tensor.detach().cpu().numpy())


def _add_batch_axis(value: Any, ndims: tuple[int, ...]) -> tuple[Any, bool]:
    if isinstance(value, torch.Tensor) and value.dim() in ndims:
        return value.unsqueeze(0), True
    return value, False


def _mapped(function: str, param: str, table: Mapping[Any, Any], value: Any) -> Any:
    try:
        return table[value]
    except (KeyError, TypeError):
        raise UnsupportedOperation(
            f"{function}: {param}={value!r} is not supported; supported: {sorted(map(repr, table))}"
        ) from None


def _hashable(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    try:
        hash(value)
    except TypeError:
        raise UnsupportedOperation(f"configuration value {value!r} is not hashable") from None
    return value

"""The migrated path of one call, the same for every library: refuse what the op declares
unsupported, adapter in, backend, adapter out.

:class:`Executor` runs each :class:`~codedag.backends.contract.Strategy` (move the inputs only,
adapt the arguments, or build a transform from the configuration and apply it). Before any value
is converted, :meth:`Executor.refusal` checks the call against the op's declared quirks (output
buffers, the adapter's dtypes, channels and sizes, the op's own check) and a refused call raises
:class:`~codedag.backends.contract.DeclaredUnsupported` with the declared reason;
:class:`~codedag.migrate.wrapper.UniversalWrapper` then runs the original.

On devices sharing memory with the host, a call passing no output buffer and accepted by the op's
own check first tries the adapter's fast path (``fast_path(spec)``, built once per op): the same
checks and conversions in one pass over the arguments. A call outside its case takes the general
path above, unchanged.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from codedag.backends.adapters import ArrayAdapter
from codedag.backends.contract import (
    DEVICE,
    NOT_TAKEN,
    Adapter,
    DeclaredUnsupported,
    FastPath,
    OpSpec,
    Strategy,
)
from codedag.backends.device_values import CallValues, ValueConverter
from codedag.errors import UnsupportedOperation

FACTORY_CACHE_SIZE = 64
"""Transforms a FactoryOp keeps per function (least recently built dropped first)."""

_ARRAYS = ArrayAdapter()


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
        self.adapter: Adapter = spec.adapter if spec.adapter is not None else _ARRAYS
        self.factories: OrderedDict[Any, Any] = OrderedDict()
        self._lock = threading.Lock()
        self._factory = spec.strategy is Strategy.FACTORY_OP
        self._adapting = bool(spec.value_maps or spec.renames or spec.inject_kwargs)
        self._backend = spec.backend if spec.backend is not None else original
        quirks = spec.quirks
        names = spec.positional_names
        self._buffer_positions = tuple(names.index(b) for b in quirks.buffers if b in names)
        self._buffer_names = frozenset(quirks.buffers)
        self._check = quirks.check
        self._inplace = quirks.inplace
        # Calls with fewer positional arguments than this pass no output buffer positionally.
        self._first_buffer = min(self._buffer_positions, default=len(names) + 1)
        plain = not (self._factory or self._adapting or self._inplace)
        build = getattr(self.adapter, "fast_path", None)
        self._fast: FastPath | None = build(spec) if plain and build is not None else None

    def refusal(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
        """Why the op's declaration refuses this call, or ``None`` (nothing is converted)."""
        for position in self._buffer_positions:
            if position < len(args) and args[position] is not None:
                return f"{self.spec.positional_names[position]}= writes into a caller's buffer"
        if kwargs and not self._buffer_names.isdisjoint(kwargs):
            for name in self.spec.quirks.buffers:
                if kwargs.get(name) is not None:
                    return f"{name}= writes into a caller's buffer"
        reason = self.adapter.refuse(self.spec, args, kwargs)
        if reason is None and self._check is not None:
            reason = self._check_reason(args, kwargs)
        return reason

    def _check_reason(self, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
        """Why the op's own check refuses the call, or ``None`` (the op declares a check)."""
        assert self._check is not None
        try:
            return self._check(*args, **kwargs)
        except TypeError as e:  # arguments the library's signature does not take
            return f"arguments do not match the signature: {e}"

    def run(self, args: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Any:
        """Run the backend on ``device`` for one library call; exceptions propagate.

        Raises:
            DeclaredUnsupported: the op's declaration refuses the call (nothing ran).
        """
        fast = self._fast
        if (
            fast is not None
            and len(args) <= self._first_buffer
            and (not kwargs or self._buffer_names.isdisjoint(kwargs))
        ):
            converter = self.converters.get(device)
            if (
                converter is not None
                and converter.zero_copy
                and (self._check is None or self._check_reason(args, kwargs) is None)
            ):
                result = fast(self._backend, args, kwargs, converter)
                if result is not NOT_TAKEN:
                    return result
        return self._run(args, kwargs, device)

    def _run(self, args: tuple[Any, ...], kwargs: dict[str, Any], device: str) -> Any:
        """The general path: refusal, the adapter's conversions, the backend."""
        spec = self.spec
        reason = self.refusal(args, kwargs)
        if reason is not None:
            raise DeclaredUnsupported(f"{spec.name}: {reason}")
        if kwargs and not self._buffer_names.isdisjoint(kwargs):  # dst=None, out=None
            kwargs = {k: v for k, v in kwargs.items() if k not in self._buffer_names}
        converter = self.converters.get(device)
        if converter is None:
            converter = ValueConverter(device)
            if isinstance(self.converters, dict):
                self.converters[device] = converter
        call = CallValues()
        try:
            if self._factory:
                result, state = self._factory_call(args, kwargs, converter, call, device)
            else:
                new_args, new_kwargs, state = self.adapter.to_backend(
                    spec, args, kwargs, converter, call
                )
                if self._adapting:
                    new_args, new_kwargs = self._adapt(new_args, new_kwargs, device)
                result = self._backend(*new_args, **new_kwargs)
                for index in self._inplace:
                    _copy_back(args[index], new_args[index])
            return self.adapter.to_library(spec, result, converter, call, state)
        finally:
            converter.finish(call)

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
    ) -> tuple[Any, Any]:
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
            factory = self._backend
            transform = factory(**config, device=torch.device(device))
            with self._lock:
                self.factories[key] = transform
                while len(self.factories) > FACTORY_CACHE_SIZE:
                    self.factories.popitem(last=False)
        _args, converted, state = self.adapter.to_backend(spec, (), data, converter, call)
        return transform(*(converted[n] for n in spec.data_params if n in converted)), state


def _copy_back(target: object, tensor: object) -> None:
    """Write an in-place result back into the caller's array unless they share memory."""
    if not isinstance(target, np.ndarray) or not isinstance(tensor, torch.Tensor):
        return
    if tensor.device.type == "cpu" and tensor.data_ptr() == target.ctypes.data:
        return
    np.copyto(target, tensor.detach().cpu().numpy())


def _mapped(function: str, param: str, table: Mapping[Any, Any], value: object) -> Any:
    try:
        return table[value]
    except (KeyError, TypeError):
        raise UnsupportedOperation(
            f"{function}: {param}={value!r} is not supported; supported: {sorted(map(repr, table))}"
        ) from None


def _hashable(value: object) -> Any:
    if isinstance(value, list | tuple):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, np.ndarray):
        return (value.dtype.str, value.shape, value.tobytes())
    try:
        hash(value)
    except TypeError:
        raise UnsupportedOperation(f"configuration value {value!r} is not hashable") from None
    return value

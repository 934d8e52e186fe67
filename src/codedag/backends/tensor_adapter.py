"""The adapter of torch functions called on CPU tensors: tensors move to the device and results
return to the caller's device (see :mod:`.adapters`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from codedag.backends.adapter_values import results
from codedag.backends.contract import OpSpec, Strategy
from codedag.backends.device_values import CallValues, ValueConverter


class TensorAdapter:
    """Torch functions called on CPU tensors: tensors move to the device, results move back."""

    default_strategy = Strategy.MOVE_ONLY
    library = "torch"

    def data_positions(self, spec: OpSpec) -> tuple[tuple[int, str], ...]:
        """Tensors are found by type."""
        return ()

    def refuse(self, spec: OpSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
        """Nothing is refused: the original torch function runs on the device."""
        return None

    def to_backend(
        self,
        spec: OpSpec,
        args: tuple[Any, ...],
        kwargs: Mapping[str, Any],
        converter: ValueConverter,
        call: CallValues,
    ) -> tuple[list[Any], dict[str, Any], Any]:
        """Tensor arguments on the device (the caller's device is remembered)."""
        to_device = converter.to_device
        return (
            [to_device(v, call) for v in args],
            {k: to_device(v, call) for k, v in kwargs.items()},
            None,
        )

    def to_library(
        self,
        spec: OpSpec,
        result: object,
        converter: ValueConverter,
        call: CallValues,
        state: object,
    ) -> Any:
        """Result tensors on the caller's device."""
        device = call.torch_device or torch.device("cpu")
        return results(result, lambda t: t.to(device))

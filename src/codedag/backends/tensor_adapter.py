"""The adapter of torch functions called on CPU tensors: tensors move to the device and results
return to the caller's device (see :mod:`.adapters`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch

from codedag.backends.adapter_values import ValueAdapter
from codedag.backends.contract import OpSpec, Strategy
from codedag.backends.device_values import CallValues, ValueConverter


class TensorAdapter(ValueAdapter):
    """Torch functions called on CPU tensors: tensors move to the device (the caller's device is
    remembered), results move back."""

    default_strategy = Strategy.MOVE_ONLY
    library = "torch"

    def data_positions(self, spec: OpSpec) -> tuple[tuple[int, str], ...]:
        """Tensors are found by type."""
        return ()

    def refuse(self, spec: OpSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
        """Nothing is refused: the original torch function runs on the device."""
        return None

    def library_leaf(
        self, spec: OpSpec, converter: ValueConverter, call: CallValues, state: object
    ) -> Callable[[Any], Any]:
        """Result tensors on the caller's device."""
        device = call.torch_device or torch.device("cpu")
        return lambda tensor: tensor.to(device)

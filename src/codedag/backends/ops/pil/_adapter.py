"""The PIL adapter and the declaration helper of the PIL ops.

A ``PIL.Image.Image`` argument (``self`` of an Image method, ``image`` of an ImageOps function)
reaches the backend as a :class:`~._batch.PILBatch` of one image: its pixels (``np.asarray``) as a
uint8 tensor on the device plus its mode. A ``PILBatch`` result comes back as a PIL image of the
batch's mode; other arrays as C-contiguous NumPy arrays.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from codedag.backends.adapter_values import ValueAdapter, describe
from codedag.backends.contract import OpSpec, Strategy, declare
from codedag.backends.device_values import CallValues, ValueConverter
from codedag.backends.ops.pil._batch import BANDS, PILBatch
from codedag.errors import UnsupportedOperation

_MODES = frozenset(BANDS)
_PARAMS = ("self", "image")


def _image_type() -> Any:
    module = sys.modules.get("PIL.Image")
    return getattr(module, "Image", None) if module is not None else None


class PILAdapter(ValueAdapter):
    """PIL images in as batches of one, ``PILBatch`` results out as PIL images."""

    library = "pil"
    default_strategy = Strategy.STANDARD_OP
    leaf_types = (PILBatch, torch.Tensor)

    def __init__(self) -> None:
        self._positions: dict[Any, tuple[tuple[int, str], ...]] = {}

    def data_positions(self, spec: OpSpec) -> tuple[tuple[int, str], ...]:
        """``self`` or ``image`` (the first parameter otherwise)."""
        key = (spec.name, spec.positional_names)
        found = self._positions.get(key)
        if found is None:
            names = spec.positional_names
            found = tuple((i, p) for i, p in enumerate(names) if p in _PARAMS)
            if not found and names:
                found = ((0, names[0]),)
            self._positions[key] = found
        return found

    def refuse(self, spec: OpSpec, args: tuple[Any, ...], kwargs: Mapping[str, Any]) -> str | None:
        """Images of another mode than declared, empty images, non-images."""
        modes = spec.quirks.dtypes if spec.quirks.dtypes is not None else _MODES
        image_type = _image_type()
        for position, name in self.data_positions(spec):
            if 0 <= position < len(args):
                value = args[position]
            elif name in kwargs:
                value = kwargs[name]
            else:
                continue
            if image_type is None or not isinstance(value, image_type):
                return f"{name}: {describe(value)}; expected a PIL image"
            if value.mode not in modes:
                return f"{name}: PIL mode {value.mode!r}; supported: {', '.join(sorted(modes))}"
            if 0 in value.size and not spec.quirks.empty:
                return f"{name}: empty image {value.size}"
        return None

    def backend_value(self, converter: ValueConverter, call: CallValues) -> Callable[[Any], Any]:
        """Images as ``PILBatch`` of one; arrays as tensors; the rest as it is."""
        image_type = _image_type()

        def convert(value: object) -> Any:
            if image_type is not None and isinstance(value, image_type):
                tensor = converter.array_to_tensor(np.asarray(value), call)
                return PILBatch(tensor.unsqueeze(0), value.mode)
            return converter.to_device(value, call)

        return convert

    def library_leaf(
        self, spec: OpSpec, converter: ValueConverter, call: CallValues, state: object
    ) -> Callable[[Any], Any]:
        """``PILBatch`` of one back to a PIL image; tensors to C-contiguous arrays."""

        def leaf(result: PILBatch | torch.Tensor) -> Any:
            if isinstance(result, torch.Tensor):
                return converter.tensor_to_array(result, "C", call)
            from PIL import Image

            data = result.data
            if data.shape[0] != 1:
                raise UnsupportedOperation(f"backend returned {data.shape[0]} images for one")
            image = Image.fromarray(converter.tensor_to_array(data[0], "C", call))
            if image.mode != result.mode:
                raise UnsupportedOperation(f"result has mode {image.mode!r}, not {result.mode!r}")
            return image

        return leaf


PIL = PILAdapter()


def op(name: str, backend: Callable[..., Any], **quirks: Any) -> OpSpec:
    """Declare a PIL op (bit-exact against Pillow unless declared otherwise)."""
    return declare(name, backend, PIL, **quirks)

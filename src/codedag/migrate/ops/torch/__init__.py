"""Torch functions that user code calls on CPU tensors: MoveOnly, the function itself runs on the
device with its tensor arguments moved there, and the result returns to the caller's device.

There is no backend to write: the op is the original torch function (backend ``None``).
"""

from __future__ import annotations

from codedag.migrate.adapters import TensorAdapter
from codedag.migrate.contract import Library, declare

TORCH = TensorAdapter()

TORCH_MOVE_ONLY: tuple[str, ...] = (
    "torch.nn.functional.interpolate",
    "torch.conv1d",
    "torch.conv2d",
    "torch.avg_pool1d",
    "torch.nn.functional.avg_pool2d",
    "torch.nn.functional.grid_sample",
    "torch.nn.functional.pad",
    "torch.functional.stft",
    "torch.matmul",
    "torch.fft.fft",
    "torch.fft.rfft",
    "torch.fft.fft2",
    "torch.fft.rfft2",
)

LIBRARY = Library(
    "torch",
    TORCH,
    tuple(declare(name, None, TORCH, buffers=("out",)) for name in TORCH_MOVE_ONLY),
    namespaces=("torch", "torch.nn.functional", "torch.fft", "torch.functional"),
)

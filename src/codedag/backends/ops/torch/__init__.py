"""Torch functions that user code calls on CPU tensors: MoveOnly, the function itself runs on the
device with its tensor arguments moved there, and the result returns to the caller's device.

There is no backend to write: the op is the original torch function (backend ``None``).
"""

from __future__ import annotations

from typing import Any

import torch

from codedag.backends.adapters import TensorAdapter
from codedag.backends.contract import Fidelity, Library, declare

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


def _floating_operands(input: Any, other: Any, *, out: Any = None) -> str | None:
    """torch.matmul: CUDA has no integer or boolean matrix product (``addmm_cuda`` for Long)."""
    for value in (input, other):
        if isinstance(value, torch.Tensor) and not (
            value.dtype.is_floating_point or value.dtype.is_complex
        ):
            return f"matmul of {value.dtype} tensors: CUDA has no integer matrix product"
    return None


CHECKS = {"torch.matmul": _floating_operands}
KERNEL_SUMS: tuple[str, ...] = (
    "torch.conv1d",
    "torch.conv2d",
    "torch.fft.fft",
    "torch.fft.fft2",
    "torch.fft.rfft",
    "torch.fft.rfft2",
    "torch.functional.stft",
    "torch.matmul",
    "torch.nn.functional.grid_sample",
    "torch.nn.functional.interpolate",
)
"""Ops whose CUDA kernels sum in another order than the CPU's: within tolerance, not exact."""


def _fidelity(name: str) -> Fidelity:
    return Fidelity.TOLERANCE if name in KERNEL_SUMS else Fidelity.EXACT


LIBRARY = Library(
    "torch",
    TORCH,
    tuple(
        declare(
            name,
            None,
            TORCH,
            buffers=("out",),
            check=CHECKS.get(name),
            fidelity=_fidelity(name),
        )
        for name in TORCH_MOVE_ONLY
    ),
    namespaces=("torch", "torch.nn.functional", "torch.fft", "torch.functional"),
)

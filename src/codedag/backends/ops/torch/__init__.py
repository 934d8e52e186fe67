"""Torch functions that user code calls on CPU tensors: MoveOnly, the function itself runs on the
device with its tensor arguments moved there, and the result returns to the caller's device.

There is no backend to write: the op is the original torch function (backend ``None``);
``facts.py`` holds what codedag knows about torch besides these ops.
"""

from __future__ import annotations

import torch

from codedag.backends.adapters import TensorAdapter
from codedag.backends.contract import Library, Tolerance, declare
from codedag.backends.ops.torch.facts import FACTS

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


def _floating_operands(input: object, other: object, *, out: object = None) -> str | None:
    """torch.matmul: CUDA has no integer or boolean matrix product (``addmm_cuda`` for Long)."""
    for value in (input, other):
        if isinstance(value, torch.Tensor) and not (
            value.dtype.is_floating_point or value.dtype.is_complex
        ):
            return f"matmul of {value.dtype} tensors: CUDA has no integer matrix product"
    return None


CHECKS = {"torch.matmul": _floating_operands}

# On the CPU the original function runs itself: bit-exact. On CUDA, cuDNN, cuBLAS and cuFFT sum in
# another order than the CPU kernels (seen on an H100: up to 1.9e-6 absolute on O(10) float32
# values); pooling and padding are exact.
DEVICE_KERNELS = Tolerance(
    atol=1e-4,
    rtol=1e-5,
    note="exact on the CPU; on CUDA, float32 sums in cuDNN/cuBLAS/cuFFT order: a few ulp of "
    "sum(|terms|) (TF32 convolutions, where the user enables them, round further and are "
    "switched back by the run-time check)",
)
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
"""Ops whose CUDA kernels sum in another order than the CPU's: within :data:`DEVICE_KERNELS`."""

LIBRARY = Library(
    FACTS,
    TORCH,
    tuple(
        declare(
            name,
            None,
            TORCH,
            buffers=("out",),
            check=CHECKS.get(name),
            tolerance=DEVICE_KERNELS if name in KERNEL_SUMS else None,
        )
        for name in TORCH_MOVE_ONLY
    ),
)

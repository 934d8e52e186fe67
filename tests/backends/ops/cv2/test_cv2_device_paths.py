"""The few-launch paths the backends take on a device (inside ``no_host_sync``) give the CPU
paths' results bit for bit: the gathered and windowed uint8 filter, the one-pass INTER_AREA
cell sum, the channel swap as one flip."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch

from codedag.backends.host_sync import no_host_sync
from codedag.backends.ops.cv2.color import cvtColor
from codedag.backends.ops.cv2.filter import GaussianBlur
from codedag.backends.ops.cv2.resize import INTER_AREA, resize

BORDERS = [0, 1, 2, 4]  # constant, replicate, reflect, reflect101


def _images(shape: tuple[int, ...], seed: int = 0) -> torch.Tensor:
    rng = np.random.default_rng(seed)
    return torch.from_numpy(rng.integers(0, 256, shape, dtype=np.uint8))


def _both(call: Callable[[], torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
    cpu = call()
    with no_host_sync():
        device = call()
    return cpu, device


@pytest.mark.parametrize("shape", [(3, 9, 13, 3), (2, 5, 4), (2, 7, 6, 4)])
@pytest.mark.parametrize("ksize", [(3, 3), (5, 3), (1, 7)])
@pytest.mark.parametrize("border", BORDERS)
def test_uint8_gaussian_blur_on_a_device_path_equals_the_cpu_path(
    shape: tuple[int, ...], ksize: tuple[int, int], border: int
) -> None:
    x = _images(shape)
    cpu, device = _both(lambda: GaussianBlur(x, ksize, 0, borderType=border))
    assert torch.equal(cpu, device)


@pytest.mark.parametrize("shape", [(2, 8, 12, 3), (2, 12, 6), (1, 9, 9, 4)])
@pytest.mark.parametrize("cells", [(2, 2), (3, 3), (4, 2)])
def test_integer_scale_area_on_a_device_path_equals_the_cpu_path(
    shape: tuple[int, ...], cells: tuple[int, int]
) -> None:
    x = _images(shape, 1)
    size = (shape[2] // cells[0], shape[1] // cells[1])
    cpu, device = _both(lambda: resize(x, size, interpolation=INTER_AREA))
    assert torch.equal(cpu, device)


@pytest.mark.parametrize("code", [2, 3, 4])  # BGR2RGBA, RGBA2BGR, BGR2RGB
def test_channel_swaps_on_a_device_path_equal_the_cpu_path(code: int) -> None:
    x = _images((2, 5, 6, 3 if code != 3 else 4), 2)
    cpu, device = _both(lambda: cvtColor(x, code))
    assert torch.equal(cpu, device)

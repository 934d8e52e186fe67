"""The warp kernels' device path (no host reads) against cv2: one matrix for a whole batch,
images in any memory layout, 1 and 4 channels, every border; and the fma emulation's inputs."""

from __future__ import annotations

import math

import cv2
import numpy as np
import pytest
import torch
from migrate_support import CV2_BORDERS

from codedag.backends.host_sync import no_host_sync
from codedag.backends.ops import cv2 as ops
from codedag.backends.ops.cv2 import _warp_coords as warp_coords


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
@pytest.mark.parametrize("channels", [1, 4])
@pytest.mark.parametrize("border", CV2_BORDERS)
def test_one_matrix_for_a_batch_of_strided_images_warps_each_as_cv2(
    dtype: type, channels: int, border: int
) -> None:
    rng = np.random.default_rng(channels + border)
    planar = rng.integers(0, 256, (3, channels, 17, 22)).astype(dtype)  # (N, C, H, W)
    images = torch.from_numpy(planar).permute(0, 2, 3, 1)  # NHWC, not contiguous
    if channels == 1:
        images = images[..., 0]
    m = cv2.getRotationMatrix2D((11.0, 8.5), 33.0, 1.3)
    m[:, 2] += (2.25, -3.5)
    value = (300.0, -4.0, 17.0, 9.0)  # saturated for uint8
    with no_host_sync():
        got = ops.warpAffine(
            images, m, (25, 19), flags=cv2.INTER_LINEAR, borderMode=border, borderValue=value
        ).numpy()
    for i, out in enumerate(got):
        image = planar[i].transpose(1, 2, 0)
        image = np.ascontiguousarray(image[..., 0] if channels == 1 else image)
        expected = cv2.warpAffine(
            image, m, (25, 19), flags=cv2.INTER_LINEAR, borderMode=border, borderValue=value
        )
        assert np.array_equal(out, expected)


def test_fma_emulation_takes_a_float32_term_as_its_float64_value() -> None:
    rng = np.random.default_rng(2)
    p = rng.random(500).astype(np.float32).astype(np.float64) * rng.integers(1, 999, 500)
    c32 = (rng.random(500) * 2.0 ** rng.integers(-60, 20, 500)).astype(np.float32)
    c32 *= rng.choice([-1, 1], 500).astype(np.float32)
    got = warp_coords.fma_to_f32(torch.tensor(p), torch.tensor(c32)).numpy()
    want = warp_coords.fma_to_f32(torch.tensor(p), torch.tensor(c32.astype(np.float64))).numpy()
    assert np.array_equal(got.view(np.int32), want.view(np.int32))


def test_fma_emulation_keeps_an_infinite_sum_infinite() -> None:
    p = torch.tensor([math.inf, -math.inf, 1.0, 3.0], dtype=torch.float64)
    c = torch.tensor([1.0, 2.0, math.inf, -math.inf], dtype=torch.float32)
    got = warp_coords.fma_to_f32(p, c).tolist()
    assert got == [math.inf, -math.inf, math.inf, -math.inf]

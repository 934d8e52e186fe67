"""The hand-written floor's chains run on every device: CUDA has no uint8 bilinear kernel, so the
floor resizes through float32 there; that route is checked here on the CPU against torch's own
uint8 kernel, and each floor is run end to end through it."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from bench_loading import load_benchmark

from codedag.experiments.pipelines import make_dataset

handwritten = load_benchmark("handwritten")


@pytest.mark.parametrize("size", [(37, 53), (128, 96), (300, 300)])
def test_float_route_matches_torch_uint8_kernel(size: tuple[int, int]) -> None:
    x = torch.randint(
        0, 256, (2, 3, 97, 131), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
    )
    direct = handwritten.resize_bilinear_u8(x, size)
    via_float = handwritten.resize_bilinear_u8_via_float(x, size)
    assert via_float.dtype == torch.uint8 and via_float.shape == direct.shape
    assert (direct.int() - via_float.int()).abs().max().item() <= 1


@pytest.mark.parametrize("name", ["demo_image", "letterbox"])
def test_floor_runs_through_the_float_route(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    sizes = {
        "demo_image": {"image_size": 64, "source_size": 96},
        "letterbox": {"img_size": 96, "min_size": 64, "max_size": 128},
    }
    dataset = make_dataset(name, n=4, **sizes[name])
    floor = handwritten.FLOORS[name]
    inputs = [floor.prepare(dataset, i) for i in range(4)]
    cpu = floor.run(inputs, torch.device("cpu"))
    monkeypatch.setattr(handwritten, "resize_bilinear_u8", handwritten.resize_bilinear_u8_via_float)
    routed = floor.run(inputs, torch.device("cpu"))
    assert routed.shape == cpu.shape and routed.dtype == torch.float32
    # one uint8 level at most, through the normalization (std >= 0.2 in these pipelines)
    assert np.abs((routed - cpu).numpy()).max() <= 1 / 255 / 0.2 + 1e-5

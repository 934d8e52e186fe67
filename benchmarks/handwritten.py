"""Hand-written batched torch versions of the example pipelines' chains: the floor.

What a torch engineer writes by hand to run a pipeline's per-sample chain once per batch, with
torch's own primitives and no concern for matching cv2 bit for bit: ``F.interpolate`` for
``cv2.resize``, a channel flip for ``cv2.cvtColor(BGR2RGB)``, ``torch.where`` over a flipped copy
for a random ``cv2.flip``, ``affine_grid`` + ``grid_sample`` for ``cv2.warpAffine``, a depthwise
``conv2d`` for ``cv2.GaussianBlur``, ``F.pad`` for the letterbox border, and the normalization as
tensor arithmetic. Each :class:`Floor` has two parts:

* ``prepare(dataset, index)``: the per-sample work that is not part of the chain (decoding, the
  pipeline's own random draws), on the CPU, as the pipeline does it;
* ``run(inputs, device)``: the chain for a batch of prepared samples.

:func:`floor_loader` wraps a pipeline's dataset so a DataLoader yields ``(batch, labels)`` with
the chain run by ``run`` in the collate function: the loader-level floor. Pipelines without a
hand-written version (their chains are not the point of the floor, or are not one chain) are
absent from :data:`FLOORS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset

from codedag.experiments.pipelines.letterbox import MEAN_RGB, PAD_COLOR, STD_RGB

IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)


@dataclass(frozen=True)
class Floor:
    """A pipeline's chain written by hand in batched torch (see the module docstring)."""

    prepare: Callable[[Any, int], Any]
    run: Callable[[list[Any], torch.device], torch.Tensor]


def _decode(data: bytes) -> np.ndarray:
    image = cv2.imdecode(np.frombuffer(data, dtype=np.uint8), cv2.IMREAD_COLOR)
    if image is None:
        raise ValueError("undecodable sample")
    return image


def resize_bilinear_u8(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """``F.interpolate`` (bilinear, half-pixel centres) of a uint8 NCHW batch, as uint8.

    torch's CPU kernel takes uint8 directly; CUDA's has no uint8 kernel, so there the batch goes
    through float32 and is rounded back, as a hand-written CUDA chain would do it.
    """
    if x.device.type == "cpu":
        return F.interpolate(x, size=size, mode="bilinear", align_corners=False)
    return resize_bilinear_u8_via_float(x, size)


def resize_bilinear_u8_via_float(x: torch.Tensor, size: tuple[int, int]) -> torch.Tensor:
    """The float32 route of :func:`resize_bilinear_u8`, on any device."""
    y = F.interpolate(x.float(), size=size, mode="bilinear", align_corners=False)
    return y.round_().clamp_(0, 255).to(torch.uint8)


def _theta(matrix: np.ndarray, src_hw: tuple[int, int], dst_hw: tuple[int, int]) -> np.ndarray:
    """``affine_grid``'s theta (normalized destination -> source) of a cv2 forward matrix."""

    def normalize(h: int, w: int) -> np.ndarray:
        return np.array([[2 / w, 0, 1 / w - 1], [0, 2 / h, 1 / h - 1], [0, 0, 1]])

    inverse = np.linalg.inv(np.vstack([matrix, [0, 0, 1]]))
    return (normalize(*src_hw) @ inverse @ np.linalg.inv(normalize(*dst_hw)))[:2]


# -- demo_image: resize, BGR->RGB, random flip, random affine, normalize, CHW ----------------------


def _demo_prepare(dataset: Any, index: int) -> tuple[np.ndarray, bool, np.ndarray, int]:
    image = _decode(dataset.samples[index].data)
    rng = np.random.default_rng(dataset.seed + index)  # the dataset's own draws, in its order
    flip = bool(rng.random() < 0.5)
    angle, scale = float(rng.uniform(-15.0, 15.0)), float(rng.uniform(0.9, 1.1))
    size = dataset.out_size
    matrix = cv2.getRotationMatrix2D((size / 2.0, size / 2.0), angle, scale)
    return image, flip, matrix, size


def _demo_run(inputs: list[Any], device: torch.device) -> torch.Tensor:
    images = torch.from_numpy(np.stack([i[0] for i in inputs])).to(device)
    size = inputs[0][3]
    x = images.permute(0, 3, 1, 2)  # NCHW view of NHWC memory (channels last)
    x = resize_bilinear_u8(x, (size, size))
    x = x.flip(1)  # BGR -> RGB
    flips = torch.tensor([i[1] for i in inputs], device=device).view(-1, 1, 1, 1)
    x = torch.where(flips, x.flip(3), x).float()
    theta = np.stack([_theta(i[2], (size, size), (size, size)) for i in inputs])
    grid = F.affine_grid(
        torch.as_tensor(theta, dtype=torch.float32, device=device),
        [len(inputs), 3, size, size],
        align_corners=False,
    )
    x = F.grid_sample(x, grid, mode="bilinear", padding_mode="reflection", align_corners=False)
    x = (x / 255.0 - IMAGENET_MEAN.to(device)) / IMAGENET_STD.to(device)
    return x.contiguous()


# -- letterbox: aspect-preserving resize + gray padding, BGR->RGB, Gaussian blur, normalize ---------


def _letterbox_prepare(dataset: Any, index: int) -> tuple[np.ndarray, int, int]:
    return _decode(dataset.samples[index].data), dataset.img_size, dataset.blur_ksize


def _letterbox_run(inputs: list[Any], device: torch.device) -> torch.Tensor:
    size, ksize = inputs[0][1], inputs[0][2]
    canvas = torch.empty((len(inputs), 3, size, size), dtype=torch.uint8, device=device)
    for row, (image, _size, _k) in enumerate(inputs):  # ragged: one resize per image
        h, w = image.shape[:2]
        ratio = min(size / h, size / w)
        nw, nh = round(w * ratio), round(h * ratio)
        x = torch.from_numpy(image).to(device).permute(2, 0, 1)[None]
        if (nw, nh) != (w, h):
            x = resize_bilinear_u8(x, (nh, nw))
        dw, dh = (size - nw) / 2, (size - nh) / 2
        top, left = round(dh - 0.1), round(dw - 0.1)
        canvas[row] = PAD_COLOR[0]
        canvas[row, :, top : top + nh, left : left + nw] = x[0]
    x = canvas.flip(1).float()  # BGR -> RGB
    kernel = torch.as_tensor(cv2.getGaussianKernel(ksize, 0), dtype=torch.float32).view(-1)
    weight = (kernel[:, None] * kernel[None, :]).expand(3, 1, ksize, ksize).to(device)
    x = F.conv2d(F.pad(x, [ksize // 2] * 4, mode="reflect"), weight, groups=3)
    mean = torch.as_tensor(MEAN_RGB).view(1, 3, 1, 1).to(device)
    std = torch.as_tensor(STD_RGB).view(1, 3, 1, 1).to(device)
    return ((x / 255.0 - mean) / std).contiguous()


FLOORS: dict[str, Floor] = {
    "demo_image": Floor(_demo_prepare, _demo_run),
    "letterbox": Floor(_letterbox_prepare, _letterbox_run),
}
"""The pipelines with a hand-written floor."""


class _Prepared(Dataset):
    """A pipeline's dataset yielding ``(prepared inputs, label)``."""

    def __init__(self, dataset: Any, floor: Floor) -> None:
        self.dataset = dataset
        self.floor = floor

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> tuple[Any, int]:
        label = int(self.dataset.samples[index].label)
        return self.floor.prepare(self.dataset, index), label


def floor_loader(name: str, loader: DataLoader, device: torch.device) -> DataLoader:
    """A DataLoader over ``loader``'s dataset whose batches run the hand-written chain."""
    floor = FLOORS[name]

    def collate(batch: list[tuple[Any, int]]) -> tuple[torch.Tensor, torch.Tensor]:
        inputs = [b[0] for b in batch]
        return floor.run(inputs, device), torch.tensor([b[1] for b in batch])

    return DataLoader(
        _Prepared(loader.dataset, floor),
        batch_size=loader.batch_size,
        num_workers=loader.num_workers,
        collate_fn=collate,
        drop_last=loader.drop_last,
    )

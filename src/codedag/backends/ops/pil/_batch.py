"""PILBatch: N PIL images of one mode and size as one uint8 tensor, and the helpers the PIL
backends share (Pillow's enum values, alpha premultiplication).

Images travel as :class:`PILBatch`: a uint8 tensor (N, H, W, C) for multi-band modes or (N, H, W)
for single-band ones, plus the mode string; one PIL call is a batch of one. :func:`from_pil` and
:func:`to_pil` convert lists of equally sized ``PIL.Image.Image`` of one mode to and from it.
Modes: L, LA, RGB, RGBA (8 bits per band).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from codedag.errors import UnsupportedOperation

BANDS = {"L": 1, "LA": 2, "RGB": 3, "RGBA": 4}

# Pillow's Resampling / Transpose enum values (stable since Pillow 2): compared as ints.
NEAREST, LANCZOS, BILINEAR, BICUBIC, BOX, HAMMING = 0, 1, 2, 3, 4, 5
FLIP_LEFT_RIGHT, FLIP_TOP_BOTTOM, ROTATE_90, ROTATE_180, ROTATE_270, TRANSPOSE, TRANSVERSE = range(
    7
)


@dataclass(frozen=True)
class PILBatch:
    """N images of one PIL mode and size: uint8 (N, H, W, C), or (N, H, W) for single-band modes.

    ``size`` is PIL's (width, height). Build one from PIL images with :func:`from_pil`; turn it back
    into PIL images with :func:`to_pil`.
    """

    data: torch.Tensor
    mode: str

    def __post_init__(self) -> None:
        if self.mode not in BANDS:
            raise UnsupportedOperation(f"PIL mode {self.mode!r}; expected one of {sorted(BANDS)}")
        want = 3 if BANDS[self.mode] == 1 else 4
        if self.data.dtype != torch.uint8 or self.data.dim() != want:
            raise UnsupportedOperation(
                f"mode {self.mode} needs a uint8 tensor of {want} dims, got {self.data.dtype} "
                f"{tuple(self.data.shape)}"
            )
        if want == 4 and self.data.shape[-1] != BANDS[self.mode]:
            raise UnsupportedOperation(f"mode {self.mode} needs {BANDS[self.mode]} bands")

    @property
    def size(self) -> tuple[int, int]:
        """(width, height), as ``PIL.Image.Image.size``."""
        return int(self.data.shape[2]), int(self.data.shape[1])

    def bands(self) -> torch.Tensor:
        """The data as (N, H, W, C) whatever the mode."""
        return self.data if self.data.dim() == 4 else self.data.unsqueeze(-1)

    def with_bands(self, data: torch.Tensor, mode: str | None = None) -> PILBatch:
        """A batch of ``mode`` (default: this one) from (N, H, W, C) data."""
        mode = mode or self.mode
        return PILBatch(data[..., 0] if BANDS[mode] == 1 else data, mode)


def from_pil(images: Sequence[Any], device: torch.device | str = "cpu") -> PILBatch:
    """Stack equally sized PIL images of one mode into a :class:`PILBatch` on ``device``."""
    modes = {im.mode for im in images}
    sizes = {im.size for im in images}
    if len(modes) != 1 or len(sizes) != 1:
        raise UnsupportedOperation(f"a batch needs one mode and size, got {modes} and {sizes}")
    arr = np.stack([np.asarray(im) for im in images])
    return PILBatch(torch.from_numpy(arr).to(device), modes.pop())


def to_pil(batch: PILBatch) -> list[Any]:
    """The batch as a list of ``PIL.Image.Image``."""
    from PIL import Image

    arr = batch.data.cpu().numpy()
    return [Image.fromarray(a) for a in arr]  # the shape gives L, LA, RGB or RGBA


def _batch(image: object) -> PILBatch:
    if not isinstance(image, PILBatch):
        raise UnsupportedOperation(f"received {type(image).__name__}; expected a PILBatch")
    return image


def _premultiply(x: torch.Tensor) -> torch.Tensor:
    """RGBA -> RGBa (LA -> La): Pillow's MULDIV255 of the colour bands by alpha."""
    alpha = x[..., -1:].to(torch.int32)
    tmp = x[..., :-1].to(torch.int32) * alpha + 128
    color = ((tmp >> 8) + tmp) >> 8
    return torch.cat([color.to(torch.uint8), x[..., -1:]], dim=-1)


def _unpremultiply(x: torch.Tensor) -> torch.Tensor:
    """RGBa -> RGBA: 255 * c / alpha, clipped; alpha 0 or 255 keeps the colour as it is."""
    alpha = x[..., -1:].to(torch.int32)
    color = x[..., :-1].to(torch.int32)
    safe = torch.where(alpha == 0, torch.ones_like(alpha), alpha)
    scaled = torch.clamp((255 * color) // safe, max=255)
    keep = (alpha == 0) | (alpha == 255)
    color = torch.where(keep, color, scaled)
    return torch.cat([color.to(torch.uint8), x[..., -1:]], dim=-1)


def ink(color: object, mode: str) -> list[int] | str:
    """The band values ``Image.new(mode, size, color)`` fills with, or why they are not computed.

    As Pillow: an int is clipped for L and read as little-endian bytes for multi-band modes (LA
    keeps bytes 0 and 3); a tuple gives one value per band (RGB takes the first 3 of 4, RGBA adds
    alpha 255 to 3), each clipped to 0..255. Colour names, floats and palettes are left to Pillow.
    """
    bands = BANDS[mode]
    if color is None:
        return [0] * bands
    if isinstance(color, int):
        if bands == 1:
            return [min(max(int(color), 0), 255)]
        raw = [(int(color) >> (8 * i)) & 255 for i in range(4)]
        return [raw[0], raw[3]] if mode == "LA" else raw[:bands]
    if isinstance(color, tuple) and all(isinstance(v, int) for v in color):
        values = [min(max(int(v), 0), 255) for v in color]
        if mode == "RGB" and len(values) == 4:
            values = values[:3]
        if mode == "RGBA" and len(values) == 3:
            values.append(255)
        if len(values) == bands:
            return values
    return f"colour {color!r} for mode {mode} (left to Pillow)"

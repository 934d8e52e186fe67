"""``PIL.Image.Image.filter``: a FactoryOp, a transform built once per configuration and cached on
the device.

``Image.filter(filter)`` is a FactoryOp by nature: a PIL filter object *is* a configured
transform. The factory builds, once per filter configuration:

* for convolution kernels (``ImageFilter.Kernel`` and the built-in BLUR, CONTOUR, DETAIL,
  EDGE_ENHANCE(_MORE), EMBOSS, FIND_EDGES, SHARPEN, SMOOTH(_MORE)), float32 weights on the device
  and the transform below; the configuration is the filter's ``filterargs``;
* for the other filters (BoxBlur, GaussianBlur, UnsharpMask, rank filters), the batch function of
  :mod:`.imageops` bound to that filter.

Our own torch code rather than ``conv2d``: Pillow's ``ImagingFilter`` accumulates in float32 tap
by tap (rows from ``y + r`` down to ``y - r``, i.e. the kernel flipped vertically, columns left to
right), adds the offset first, rounds half up and copies the border pixels unfiltered. Doing the
same elementwise operations in the same order makes the result bit-exact on every device; a
``conv2d`` sums in another order and differs by 1 on a few percent of pixels.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from codedag.backends.contract import Strategy
from codedag.backends.ops.pil._adapter import op
from codedag.backends.ops.pil.imageops import filter_
from codedag.errors import UnsupportedOperation

_SIZES = ((3, 3), (5, 5))


def _filterargs(filter: object) -> tuple[tuple[int, int], float, float, tuple[float, ...]]:
    """The convolution parameters of a PIL filter (class or instance), or UnsupportedOperation."""
    if isinstance(filter, type):
        filter = filter()
    args = getattr(filter, "filterargs", None)
    if not isinstance(args, tuple) or len(args) != 4:
        raise UnsupportedOperation(
            f"{type(filter).__name__} is not a convolution kernel filter (ImageFilter.Kernel)"
        )
    size, scale, offset, kernel = args
    width, height = (int(s) for s in size)
    if (width, height) not in _SIZES:
        raise UnsupportedOperation(f"kernel size {size}; supported: 3x3 and 5x5")
    if not scale:
        raise UnsupportedOperation("kernel scale 0 (a division by zero) is left to Pillow")
    return (width, height), float(scale), float(offset), tuple(float(k) for k in kernel)


def pil_filter_key(config: dict[str, Any]) -> Any:
    """Cache key of a filter configuration: ``filterargs`` for kernels (equal kernels share one
    transform), else the filter's type and attributes."""
    filter = config["filter"]
    if isinstance(filter, type):
        filter = filter()
    if getattr(filter, "filterargs", None) is not None:
        return ("kernel", _filterargs(filter))
    try:
        items = tuple(sorted((k, _frozen(v)) for k, v in vars(filter).items()))
        hash(items)
    except TypeError:
        raise UnsupportedOperation(f"{type(filter).__name__}: unhashable configuration") from None
    return (type(filter).__qualname__, items)


def _frozen(value: object) -> Any:
    return tuple(_frozen(v) for v in value) if isinstance(value, list | tuple) else value


def pil_kernel_filter(
    filter: object, *, device: torch.device
) -> Callable[[torch.Tensor], torch.Tensor]:
    """Build the transform of a PIL kernel filter on ``device`` (the FactoryOp factory)."""
    (kw, kh), scale, offset, kernel = _filterargs(filter)
    weights = (
        torch.tensor(kernel, dtype=torch.float32) / torch.tensor(scale, dtype=torch.float32)
    ).tolist()
    offset32 = torch.tensor(offset, dtype=torch.float32, device=device)
    rh, rw = kh // 2, kw // 2

    def transform(images: torch.Tensor) -> torch.Tensor:
        if images.dtype != torch.uint8 or images.dim() not in (3, 4):
            raise UnsupportedOperation(f"expected uint8 (N,H,W[,C]), got {images.dtype}")
        if images.dim() == 4 and images.shape[-1] not in (2, 3, 4):
            raise UnsupportedOperation(f"{images.shape[-1]} bands (PIL modes L, LA, RGB, RGBA)")
        h, w = images.shape[1:3]
        if h < kh or w < kw:  # Pillow copies images smaller than the kernel
            return images.clone()
        x = images.to(torch.float32)
        acc = offset32.expand(x[:, rh : h - rh, rw : w - rw].shape).clone()
        for i, dy in enumerate(range(rh, -rh - 1, -1)):
            row = x[:, rh + dy : h - rh + dy, 0 : w - 2 * rw] * weights[i * kw]
            for j in range(1, kw):
                row = row + x[:, rh + dy : h - rh + dy, j : w - 2 * rw + j] * weights[i * kw + j]
            acc = acc + row
        rounded = torch.where(
            acc <= 0, 0.0, torch.where(acc >= 255, 255.0, torch.floor(acc + 0.5))
        ).to(torch.uint8)
        out = images.clone()
        out[:, rh : h - rh, rw : w - rw] = rounded
        return out

    return transform


def pil_filter(filter: Any, *, device: torch.device) -> Callable[[Any], Any]:
    """The FactoryOp factory of ``Image.filter``: a transform of a batch for this filter.

    The transform takes and returns a ``PILBatch`` (a uint8 tensor (N, H, W[, C]) is accepted
    too, for kernels).
    """
    if isinstance(filter, type):
        filter = filter()
    if getattr(filter, "filterargs", None) is not None:
        kernel = pil_kernel_filter(filter, device=device)

        def transform(batch: Any) -> Any:
            if isinstance(batch, torch.Tensor):
                return kernel(batch)
            return type(batch)(kernel(batch.data), batch.mode)

        return transform

    def delegate(batch: Any) -> Any:
        return filter_(batch, filter)

    return delegate


def _filter_check(self: Any, filter: Any) -> str | None:
    """The filters computed here: kernels of 3x3 or 5x5, BoxBlur, GaussianBlur, UnsharpMask with
    non-negative radii (Python numbers: Pillow raises on NumPy ones), rank filters of odd size and valid rank."""
    from PIL import ImageFilter

    if isinstance(filter, type):
        try:
            filter = filter()
        except TypeError as e:
            return f"{filter.__name__}() needs arguments ({e})"
    if isinstance(filter, ImageFilter.Kernel | ImageFilter.BuiltinFilter):
        try:
            _filterargs(filter)
        except UnsupportedOperation as e:
            return str(e)
        return None
    if isinstance(filter, ImageFilter.BoxBlur | ImageFilter.GaussianBlur):
        radius = filter.radius
        if isinstance(radius, np.generic | np.ndarray):
            # Pillow's ``radius == (0, 0)`` is elementwise on NumPy values: it raises ValueError
            return f"{type(filter).__name__} radius of NumPy type {type(radius).__name__}"
        radii = (radius, radius) if isinstance(radius, int | float) else tuple(radius)
        if len(radii) != 2 or min(radii) < 0:
            return f"{type(filter).__name__} radius {radius!r} (Pillow raises)"
        return None
    if isinstance(filter, ImageFilter.UnsharpMask):
        return None if filter.radius >= 0 else f"UnsharpMask radius {filter.radius!r}"
    if isinstance(filter, ImageFilter.RankFilter):
        size, rank = filter.size, filter.rank
        odd = isinstance(size, int) and size % 2 == 1
        if odd and isinstance(rank, int) and 0 <= rank < size * size:
            return None
        return f"{type(filter).__name__} size {size!r} rank {rank!r} (Pillow raises ValueError)"
    return f"filter {type(filter).__name__} is left to Pillow"


OPS = [
    op(
        "PIL.Image.Image.filter",
        pil_filter,
        strategy=Strategy.FACTORY_OP,
        positional_names=("self", "filter"),
        data_params=("self",),
        config_key=pil_filter_key,
        check=_filter_check,
    )
]

"""Conformance corpus of the torch MoveOnly ops: the torch function itself runs on the device, so
each case checks that the move there and back keeps values, dtypes, shapes and the caller's
device, that torch's own exceptions come through, and that ``out=`` is refused before anything
runs. Tensors of float32/float64/complex64 (and the integer ones torch rejects), empty batches,
non-contiguous and channels-last layouts."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from hypothesis import strategies as st
from migrate_support import Args, Labeled


def tensor(*shape: int, dtype: torch.dtype = torch.float32, seed: int = 0) -> torch.Tensor:
    """A deterministic CPU tensor of ``shape`` (values in -1..1 for floats)."""
    g = torch.Generator().manual_seed(seed)
    if dtype.is_complex:
        return torch.complex(torch.rand(*shape, generator=g), torch.rand(*shape, generator=g)).to(
            dtype
        )
    if dtype.is_floating_point:
        return (torch.rand(*shape, generator=g, dtype=torch.float64) * 2 - 1).to(dtype)
    return torch.randint(-50, 50, shape, generator=g).to(dtype)


def _t(shape: tuple[int, ...], dtype: torch.dtype = torch.float32) -> Callable[[], torch.Tensor]:
    return lambda: tensor(*shape, dtype=dtype)


def _strided(shape: tuple[int, ...]) -> Callable[[], torch.Tensor]:
    return lambda: tensor(*shape[:-1], shape[-1] * 2)[..., ::2]


def _channels_last(shape: tuple[int, ...]) -> Callable[[], torch.Tensor]:
    return lambda: tensor(*shape).contiguous(memory_format=torch.channels_last)


Items = list[tuple[str, Callable[[], Args]]]


def _call(*args: Any, **kwargs: Any) -> Callable[[], Args]:
    """A case whose callable arguments are built afresh each time."""

    def build() -> Args:
        return (
            tuple(a() if callable(a) else a for a in args),
            {k: v() if callable(v) else v for k, v in kwargs.items()},
        )

    return build


IMAGE = (2, 3, 9, 11)
_CASES: dict[str, Items] = {
    "torch.nn.functional.interpolate": [
        ("bilinear x2", _call(_t(IMAGE), scale_factor=2, mode="bilinear", align_corners=False)),
        ("nearest size", _call(_t(IMAGE), size=(4, 5), mode="nearest")),
        ("bicubic float64", _call(_t(IMAGE, torch.float64), size=(13, 7), mode="bicubic")),
        ("area", _call(_t(IMAGE), size=(3, 4), mode="area")),
        ("channels last", _call(_channels_last(IMAGE), scale_factor=0.5, mode="bilinear")),
        ("empty batch", _call(_t((0, 3, 9, 11)), size=(4, 4), mode="bilinear")),
        ("uint8 nearest", _call(_t(IMAGE, torch.uint8), size=(4, 5), mode="nearest")),
        ("no size", _call(_t(IMAGE), mode="bilinear")),
    ],
    "torch.conv1d": [
        ("basic", _call(_t((2, 3, 20)), _t((4, 3, 5)))),
        ("bias stride pad", _call(_t((2, 3, 20)), _t((4, 3, 5)), _t((4,)), 2, 1)),
        ("strided input", _call(_strided((2, 3, 20)), _t((4, 3, 5)))),
        ("channel mismatch", _call(_t((2, 3, 20)), _t((4, 2, 5)))),
        ("dtype mismatch", _call(_t((2, 3, 20)), _t((4, 3, 5), torch.float64))),
    ],
    "torch.conv2d": [
        ("basic", _call(_t(IMAGE), _t((4, 3, 3, 3)))),
        ("groups dilation", _call(_t((2, 4, 9, 9)), _t((4, 2, 3, 3)), None, 1, 1, 2, 2)),
        ("channels last", _call(_channels_last(IMAGE), _t((4, 3, 3, 3)))),
        ("kernel too big", _call(_t((1, 3, 2, 2)), _t((4, 3, 3, 3)))),
    ],
    "torch.avg_pool1d": [
        ("basic", _call(_t((2, 3, 20)), 4)),
        ("stride pad ceil", _call(_t((2, 3, 20)), 3, 2, 1, True)),
        ("kernel too big", _call(_t((2, 3, 2)), 4)),
    ],
    "torch.nn.functional.avg_pool2d": [
        ("basic", _call(_t(IMAGE), 2)),
        ("stride pad", _call(_t(IMAGE), 3, stride=2, padding=1, count_include_pad=False)),
        ("divisor", _call(_t(IMAGE), 2, divisor_override=3)),
        ("int input", _call(_t(IMAGE, torch.int32), 2)),
    ],
    "torch.nn.functional.grid_sample": [
        ("bilinear", _call(_t(IMAGE), _t((2, 5, 6, 2)), align_corners=False)),
        (
            "nearest border",
            _call(_t(IMAGE), _t((2, 5, 6, 2)), mode="nearest", padding_mode="border"),
        ),
        (
            "bicubic reflection",
            _call(
                _t(IMAGE),
                _t((2, 5, 6, 2)),
                mode="bicubic",
                padding_mode="reflection",
                align_corners=True,
            ),
        ),
        ("batch mismatch", _call(_t(IMAGE), _t((3, 5, 6, 2)), align_corners=False)),
    ],
    "torch.nn.functional.pad": [
        ("constant", _call(_t(IMAGE), (1, 2, 3, 4))),
        ("value", _call(_t(IMAGE), (1, 1), value=7.0)),
        ("reflect", _call(_t(IMAGE), (2, 2, 1, 1), mode="reflect")),
        ("replicate", _call(_t(IMAGE), (2, 2, 1, 1), mode="replicate")),
        ("circular", _call(_t(IMAGE), (2, 2, 1, 1), mode="circular")),
        ("negative crop", _call(_t(IMAGE), (-1, -1))),
        ("reflect too wide", _call(_t(IMAGE), (20, 20), mode="reflect")),
        ("int8", _call(_t(IMAGE, torch.int8), (1, 1))),
    ],
    "torch.functional.stft": [
        (
            "hann",
            _call(_t((2, 400)), 64, 16, window=lambda: torch.hann_window(64), return_complex=True),
        ),
        ("no window", _call(_t((400,)), 32, return_complex=True)),
        (
            "float64 not centred",
            _call(
                _t((400,), torch.float64),
                64,
                32,
                window=lambda: torch.hann_window(64, dtype=torch.float64),
                center=False,
                return_complex=True,
            ),
        ),
        ("real output", _call(_t((400,)), 32, return_complex=False)),
        ("n_fft too big", _call(_t((20,)), 64, center=False, return_complex=True)),
    ],
    "torch.matmul": [
        ("2-d", _call(_t((5, 7)), _t((7, 3)))),
        ("batched broadcast", _call(_t((2, 5, 7)), _t((7, 3)))),
        ("vectors", _call(_t((7,)), _t((7,)))),
        ("int64", _call(_t((5, 7), torch.int64), _t((7, 3), torch.int64))),
        ("complex", _call(_t((5, 7), torch.complex64), _t((7, 3), torch.complex64))),
        ("empty", _call(_t((0, 7)), _t((7, 3)))),
        ("mismatch", _call(_t((5, 7)), _t((6, 3)))),
        ("out", _call(_t((5, 7)), _t((7, 3)), out=lambda: torch.empty(5, 3))),
    ],
    "torch.fft.fft": [
        ("real", _call(_t((4, 16)))),
        ("complex n norm", _call(_t((4, 16), torch.complex64), n=20, norm="ortho")),
        ("dim 0", _call(_t((4, 16)), dim=0)),
        ("float64 strided", _call(_strided((4, 16)))),
        ("int", _call(_t((4, 16), torch.int32))),
    ],
    "torch.fft.rfft": [
        ("real", _call(_t((4, 16)))),
        ("n forward", _call(_t((4, 16), torch.float64), n=10, norm="forward")),
        ("complex input", _call(_t((4, 16), torch.complex64))),
    ],
    "torch.fft.fft2": [
        ("real", _call(_t((2, 8, 6)))),
        ("s", _call(_t((2, 8, 6), torch.complex64), s=(4, 4))),
        ("dim", _call(_t((2, 8, 6)), dim=(0, 2))),
    ],
    "torch.fft.rfft2": [
        ("real", _call(_t((2, 8, 6)))),
        ("norm", _call(_t((2, 8, 6), torch.float64), norm="backward")),
        ("complex input", _call(_t((2, 8, 6), torch.complex64))),
    ],
}


def cases(name: str) -> Labeled:
    """The fixed corpus of a torch MoveOnly function."""
    return list(_CASES[name])


def explore(name: str) -> st.SearchStrategy[tuple[str, Callable[[], Args]]]:
    """The fixed cases (the function is torch's own: nothing more to explore)."""
    return st.sampled_from(cases(name))


NAMES = frozenset(_CASES)

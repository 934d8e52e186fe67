"""A value read back lies in memory as the value stored: its axes' order and direction kept.

What NumPy and torch compute from an array follows its layout (``np.stack`` of ``(3, H, W)``
views of ``(H, W, 3)`` images is channels-last in memory, and torch's convolutions round
differently on it), so a value read back in C order changed training's results in their last
bits.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch

from codedag.store import entry
from codedag.store.entry import CorruptEntry, decode, encode, same

SECRET = b"s" * 32
KEY = b"k" * 16
HWC = np.arange(4 * 5 * 3, dtype=np.float32).reshape(4, 5, 3)

VALUES = {
    "chw view": HWC.transpose(2, 0, 1),
    "flipped": HWC[:, ::-1],
    "flipped chw": HWC[::-1].transpose(2, 0, 1),
    "fortran": np.asfortranarray(HWC[:, :, 0]),
    "cropped chw": HWC.transpose(2, 0, 1)[:, 1:3, 1:4],
    "rows": HWC[::2],
    "broadcast": np.broadcast_to(HWC[:1], (4, 5, 3)),
    "permuted tensor": torch.from_numpy(HWC.copy()).permute(2, 0, 1),
    "c order": HWC,
    "0-d": np.array(3.5, np.float32),
    "empty": np.zeros((0, 3), np.uint8).T,
}


def _read_back(value: Any) -> Any:
    encoded = encode(value, SECRET, KEY)
    assert encoded is not None
    return decode(encoded.header, memoryview(bytes(encoded.data)), SECRET, KEY)


def _order(value: Any) -> tuple[tuple[int, ...], tuple[bool, ...]]:
    """Axes longer than 1 from the largest step to the smallest, and which run backwards."""
    strides = value.stride() if isinstance(value, torch.Tensor) else value.strides
    long = [i for i, n in enumerate(value.shape) if n > 1]
    return (
        tuple(sorted(long, key=lambda i: -abs(strides[i]))),
        tuple(strides[i] < 0 for i in long),
    )


@pytest.mark.parametrize("name", VALUES)
def test_a_value_is_read_back_laid_out_as_it_was(name: str) -> None:
    value = VALUES[name]
    out = _read_back(value)
    assert type(out) is type(value) and out.dtype == value.dtype
    assert np.array_equal(np.asarray(out), np.asarray(value))
    if name not in ("broadcast", "empty"):  # no order to keep: any is the value's
        assert _order(out) == _order(value)
    if name in ("chw view", "flipped", "flipped chw", "fortran", "permuted tensor", "c order"):
        strides = out.stride() if isinstance(out, torch.Tensor) else out.strides
        assert strides == (value.stride() if isinstance(value, torch.Tensor) else value.strides)
    if isinstance(value, np.ndarray) and name != "broadcast":  # what follows computes as before
        assert np.stack([out, out]).strides == np.stack([value, value]).strides
    if isinstance(out, np.ndarray):
        out[...] = 0  # a private, writable copy


def test_a_value_in_another_layout_is_not_the_same() -> None:
    view = HWC.transpose(2, 0, 1)
    assert same(_read_back(view), view)
    assert not same(np.ascontiguousarray(view), view)  # equal values, laid out otherwise


def test_a_header_whose_axes_do_not_fit_its_shape_is_refused() -> None:
    encoded = encode(HWC.transpose(2, 0, 1), SECRET, KEY)
    assert encoded is not None and b'"axes":[1,2,0],"flipped":[]' in encoded.header
    layout = encoded.header[: len(encoded.header) - 2 - entry.TAG_HEX]
    for bad in (b'"axes":[1,2,2]', b'"axes":[1,2]', b'"axes":[1,2,5]'):
        forged_layout = layout.replace(b'"axes":[1,2,0]', bad)
        tag = entry._tag(entry.sealer(SECRET, KEY, forged_layout), encoded.data)
        with pytest.raises(CorruptEntry, match="axes"):
            decode(forged_layout + tag + b'"}', memoryview(bytes(encoded.data)), SECRET, KEY)


@pytest.mark.parametrize(
    "value",
    [
        np.ma.masked_array([1.0, 2.0, 3.0], mask=[0, 1, 0]),  # its mean ignores the masked
        np.matrix([[1, 2], [3, 4]]),  # its ``*`` multiplies matrices
        torch.nn.Parameter(torch.zeros(2), requires_grad=False),
    ],
    ids=["masked", "matrix", "parameter"],
)
def test_a_subclass_whose_type_changes_what_is_computed_is_not_stored(value: Any) -> None:
    assert encode(value, SECRET, KEY) is None


def test_a_memory_mapped_array_is_stored_as_the_array_it_maps(tmp_path: Any) -> None:
    np.save(tmp_path / "a.npy", HWC)
    mapped = np.load(tmp_path / "a.npy", mmap_mode="r")
    out = _read_back(mapped[1:3].transpose(2, 0, 1))
    assert type(out) is np.ndarray and np.array_equal(out, HWC[1:3].transpose(2, 0, 1))

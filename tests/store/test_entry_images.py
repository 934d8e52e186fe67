"""Entries of PIL images: packed once, with the header and bytes NumPy's array of the image has."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest
import torch
from PIL import Image

from codedag.store import entry
from codedag.store import meta as meta_module
from codedag.store.entry import decode, encode, same, value_nbytes
from codedag.store.meta import Meta, meta_of

SECRET = b"s" * 32
KEY = b"k" * 16
MODES = sorted(meta_module.PIL_MODES)


def _image(mode: str, size: tuple[int, int]) -> Image.Image:
    image = Image.new(mode, size)
    bands = len(image.getbands())
    rng = np.random.default_rng(len(mode) + size[0])
    for x in range(min(size[0], 5)):
        for y in range(min(size[1], 3)):
            value = tuple(int(v) for v in rng.integers(0, 200, bands))
            image.putpixel((x, y), value[0] if bands == 1 else value)
    return image


def _json_layout(meta: Meta, array: np.ndarray) -> bytes:
    """The header opening as it was written before: the Meta through JSON, without its dtype."""
    fields = json.loads(meta.to_bytes())
    fields.pop("dtype", None)
    head = json.dumps(fields, separators=(",", ":"))[:-1]
    shape = ",".join(str(n) for n in array.shape)
    return f'{head},"dtype":"{array.dtype.str}","array_shape":[{shape}],"tag":"'.encode()


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("size", [(37, 11), (1, 1), (300, 2)])
def test_an_image_is_stored_as_numpy_reads_it_and_read_back_equal(
    mode: str, size: tuple[int, int]
) -> None:
    image = _image(mode, size)
    encoded = encode(image, SECRET, KEY)
    assert encoded is not None and encoded.owned
    array = np.asarray(image)
    assert bytes(encoded.data) == array.tobytes()
    assert encoded.header.startswith(_json_layout(meta_of(image), array))
    assert same(decode(encoded.header, encoded.data, SECRET, KEY), image)


def test_an_image_is_packed_once_without_tobytes_or_an_array(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    images = [_image("RGB", (40 + i, 30)) for i in range(3)]  # a new size, a new header each
    calls: list[str] = []
    real_tobytes = Image.Image.tobytes

    def tobytes(self: Image.Image, *args: Any, **kwargs: Any) -> bytes:
        calls.append("tobytes")
        return real_tobytes(self, *args, **kwargs)

    monkeypatch.setattr(Image.Image, "tobytes", tobytes)
    monkeypatch.setattr(
        Image.Image,
        "__array_interface__",
        property(lambda self: calls.append("array") or {}),  # type: ignore[func-returns-value]
    )
    for image in images:
        assert encode(image, SECRET, KEY) is not None
    assert calls == []


def test_a_lazily_loaded_file_image_is_stored_through_tobytes(tmp_path: Any) -> None:
    path = tmp_path / "a.png"
    _image("RGB", (9, 7)).save(path)
    with Image.open(path) as image:  # not loaded yet
        encoded = encode(image, SECRET, KEY)
        assert encoded is not None
        assert bytes(encoded.data) == np.asarray(image).tobytes()


def test_an_image_header_reads_the_bands_of_its_mode_once_per_mode_and_size(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    images = [_image("RGB", (12, 8)), _image("RGB", (12, 8)), _image("L", (12, 8))]
    meta_module._PIL_METAS.clear()
    counted: list[str] = []
    real = Image.Image.getbands
    monkeypatch.setattr(
        Image.Image, "getbands", lambda self: counted.append(self.mode) or real(self)
    )
    metas = [meta_of(image) for image in images * 3]
    assert counted == ["RGB", "L"]
    assert metas[0] == Meta("pil", (8, 12, 3), "", "RGB")
    assert metas[2] == Meta("pil", (8, 12), "", "L")


@pytest.mark.parametrize(
    ("meta", "array"),
    [
        (Meta("ndarray", (3, 4), "<f4"), np.zeros((3, 4), np.float32)),
        (Meta("ndarray", (), "<i8"), np.zeros((), np.int64)),
        (Meta("tensor", (2,), "float32"), np.zeros(2, np.float32)),
        (Meta("pil", (2, 2), "", "L"), np.zeros((2, 2), np.uint8)),
        (Meta("other", (), "", "", 'pkg.Odd "name"\\é'), np.zeros(0)),
    ],
)
def test_a_header_opening_is_written_as_json_wrote_it(meta: Meta, array: np.ndarray) -> None:
    assert entry._layout(meta, array, None) == _json_layout(meta, array)


def test_a_layout_read_once_still_checks_each_value_against_its_size() -> None:
    secret, key = b"s" * 32, b"k" * 16
    values = [np.arange(12, dtype=np.int16).reshape(3, 4) + i for i in range(3)]
    encoded = [encode(v, secret, key) for v in values]
    assert all(e is not None for e in encoded)
    for value, e in zip(values, encoded):  # one layout for all three: parsed once, read right
        assert e is not None
        got = decode(e.header, memoryview(bytes(e.data)), secret, key)
        assert got.dtype == np.int16 and np.array_equal(got, value)
    first = encoded[0]
    assert first is not None
    cut = bytes(first.data)[:-2]
    header = first.header
    layout = header[: len(header) - 2 - entry.TAG_HEX]
    resealed = entry._tag(entry.sealer(secret, key, layout), cut)  # the key holder's own tag
    forged = layout + resealed + b'"}'
    with pytest.raises(entry.CorruptEntry, match="22 bytes"):
        decode(forged, memoryview(cut), secret, key)
    with pytest.raises(entry.CorruptEntry, match="does not verify"):
        decode(header, memoryview(cut), secret, key)


def test_a_values_bytes_are_its_datas_as_the_store_keeps_it() -> None:
    # a hit's bytes read back were counted from ``.nbytes``: 0 for every PIL image
    assert value_nbytes(Image.new("RGB", (5, 4))) == 5 * 4 * 3
    assert value_nbytes(Image.new("F", (5, 4))) == 5 * 4 * 4
    assert value_nbytes(Image.new("L", (5, 4))) == 5 * 4
    assert value_nbytes(Image.new("P", (5, 4))) == 0  # a mode the store does not keep
    assert value_nbytes(np.zeros((3, 2), np.float64)) == 48
    assert value_nbytes(torch.zeros(3, 2, dtype=torch.float16)) == 12
    assert value_nbytes("text") == 0
    encoded = encode(Image.new("RGB", (5, 4)), SECRET, KEY)
    assert encoded is not None and encoded.data.nbytes == value_nbytes(Image.new("RGB", (5, 4)))


@pytest.mark.parametrize(
    "value",
    [np.array(3), np.array(2.5, np.float32), torch.tensor(7), np.zeros((4, 6))[:, ::2]],
    ids=["int64", "float32", "tensor", "strided"],
)
def test_a_value_is_read_back_with_its_shape_a_scalars_included(value: Any) -> None:
    """A 0-d array (an ``.npz`` archive's label) was stored as ``np.ascontiguousarray`` makes
    it, 1-d: read back as ``[3]``, which ``int()`` refuses."""
    encoded = encode(value, SECRET, KEY)
    assert encoded is not None
    out = decode(encoded.header, memoryview(bytes(encoded.data)), SECRET, KEY)
    assert type(out) is type(value) and tuple(out.shape) == tuple(value.shape)
    assert np.array_equal(np.asarray(out), np.asarray(value))

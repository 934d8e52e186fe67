"""A PIL image read back from the store carries the ``info`` it was stored with: EXIF bytes, ICC
profile, dpi, TIFF rationals, written as typed JSON and read back equal, or not stored at all."""

from __future__ import annotations

from typing import Any

import pytest
from PIL import Image, ImageOps
from PIL.TiffImagePlugin import IFDRational

from codedag.store import entry
from codedag.store.entry import CorruptEntry, decode, encode, same
from codedag.store.image_info import info_bytes, info_from_bytes

SECRET = b"s" * 32
KEY = b"k" * 16


def _rotated(orientation: int) -> Image.Image:
    """An image whose EXIF says to turn it, as a camera's JPEG after ``convert`` keeps it."""
    image = Image.new("RGB", (6, 4))
    image.putpixel((0, 0), (255, 0, 0))
    exif = Image.Exif()
    exif[0x0112] = orientation
    image.info.update(exif=exif.tobytes(), dpi=(72, 72), jfif=257, icc_profile=b"\x00\x01")
    return image


def _read_back(value: Any) -> Any:
    encoded = encode(value, SECRET, KEY)
    assert encoded is not None
    return decode(encoded.header, memoryview(bytes(encoded.data)), SECRET, KEY)


@pytest.mark.parametrize(
    "info",
    [
        {"exif": b"Exif\x00\x00MM", "dpi": (72.0, 72.5), "progressive": 1, "comment": "x"},
        {"transparency": (0, 0, 0), "gamma": 0.45455, "flag": True, "none": None},
        {"dpi": (IFDRational(300, 1), IFDRational(1, 3)), "tiff": {296: 2, "k": [1, b"\xff"]}},
        {},
    ],
)
def test_an_info_is_read_back_equal_with_its_types(info: dict[str, Any]) -> None:
    raw = info_bytes(info)
    assert raw is not None
    back = info_from_bytes(raw)
    assert back == info
    assert [type(v) for v in back.values()] == [type(v) for v in info.values()]


def test_an_info_holding_another_type_is_not_kept_nor_its_image_stored() -> None:
    assert info_bytes({"odd": object()}) is None
    cycle: list[Any] = []
    cycle.append(cycle)
    assert info_bytes({"cycle": cycle}) is None
    image = Image.new("L", (3, 2))
    image.info["odd"] = {1, 2}
    assert encode(image, SECRET, KEY) is None


def test_an_exif_orientation_turns_the_image_read_back_as_it_turns_the_stored_one() -> None:
    image = _rotated(6)
    out = _read_back(image)
    assert out.info == image.info and same(out, image)
    turned, own = ImageOps.exif_transpose(out), ImageOps.exif_transpose(image)
    assert turned.size == own.size == (4, 6) and turned.tobytes() == own.tobytes()
    plain = image.copy()
    plain.info = {}
    assert not same(plain, image)  # the same pixels without the EXIF


def test_an_image_without_info_is_stored_as_before() -> None:
    image = Image.new("RGB", (5, 4))
    encoded = encode(image, SECRET, KEY)
    assert encoded is not None and b'"info"' not in encoded.header
    assert encoded.data.nbytes == 5 * 4 * 3


@pytest.mark.parametrize(
    "cut", [lambda d: d[:-1], lambda d: d[:-4] + (10**6).to_bytes(4, "little"), lambda d: b"ab"]
)
def test_an_info_cut_short_or_overlong_is_refused(cut: Any) -> None:
    encoded = encode(_rotated(3), SECRET, KEY)
    assert encoded is not None
    data = cut(bytes(encoded.data))
    layout = encoded.header[: len(encoded.header) - 2 - entry.TAG_HEX]
    tag = entry._tag(entry.sealer(SECRET, KEY, layout), data)  # the key holder's own tag
    with pytest.raises(CorruptEntry, match="bytes for"):
        decode(layout + tag + b'"}', memoryview(data), SECRET, KEY)


def test_an_info_read_again_is_a_private_copy() -> None:
    info = {"exif": b"Exif", "tiff": {"k": [1, 2]}}
    raw = info_bytes(info)
    assert raw is not None
    first = info_from_bytes(raw)
    first["exif"] = b"changed"
    first["tiff"]["k"].append(3)
    assert info_from_bytes(raw) == info

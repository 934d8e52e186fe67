"""A PIL image's ``info`` (EXIF, ICC profile, dpi, transparency) kept beside its pixels.

Code after a cut reads it: ``ImageOps.exif_transpose`` turns an image by the EXIF orientation
it finds there, and an image read back without it stays unturned. The values PIL puts there
(numbers, strings, bytes, tuples, dicts, TIFF rationals) are written as typed JSON, never
pickled; an ``info`` holding anything else is not kept, and the image is then not stored.
"""

from __future__ import annotations

import base64
import copy
import json
import sys
from typing import Any

_PLAIN = (bool, int, float, str, type(None))


def info_bytes(info: dict[Any, Any]) -> bytes | None:
    """``info`` as bytes :func:`info_from_bytes` reads back equal, or None where a value is of a
    type it does not keep."""
    try:
        return json.dumps(_written(info), separators=(",", ":")).encode()
    except _Unkept:
        return None


def info_from_bytes(raw: bytes) -> dict[Any, Any]:
    """A private copy of the ``info`` :func:`info_bytes` wrote (each ``raw`` read once: the
    photos of one camera share theirs).

    Raises:
        ValueError: ``raw`` is not such an ``info``.
    """
    found = _READ.get(raw)
    if found is None:
        try:
            info = _read(json.loads(raw))
        except (
            KeyError,
            TypeError,
            IndexError,
            AttributeError,
            ImportError,
            RecursionError,
        ) as error:
            raise ValueError(f"an image's info unreadable: {error!r}") from None
        if not isinstance(info, dict):
            raise ValueError("an image's info is not a dict")
        found = (info, all(_immutable(v) for v in info.values()))
        if len(_READ) >= _READ_KEPT:
            _READ.clear()
        _READ[raw] = found
    info, immutable = found
    return dict(info) if immutable else copy.deepcopy(info)


_READ: dict[bytes, tuple[dict[Any, Any], bool]] = {}
"""Each ``info`` read, and whether its values are all immutable (a copy of the dict suffices)."""
_READ_KEPT = 1024


def _immutable(value: Any) -> bool:
    if type(value) is tuple:
        return all(_immutable(v) for v in value)
    return type(value) in _PLAIN or type(value) is bytes or type(value) is _rational_type()


class _Unkept(Exception):
    pass


_DEPTH = 8
"""How deep an ``info``'s values may nest (PIL's nest two deep; user code could make a cycle)."""


def _written(value: Any, depth: int = 0) -> Any:
    if depth > _DEPTH:
        raise _Unkept("nested too deeply")
    kind, deeper = type(value), depth + 1
    if kind in _PLAIN:
        return value
    if kind is bytes:
        return {"b": base64.b64encode(value).decode("ascii")}
    if kind is tuple:
        return {"t": [_written(v, deeper) for v in value]}
    if kind is list:
        return {"l": [_written(v, deeper) for v in value]}
    if kind is dict:
        return {"d": [[_written(k, deeper), _written(v, deeper)] for k, v in value.items()]}
    rational = _rational_type()
    if rational is not None and kind is rational:
        return {"r": [_written(value.numerator, deeper), _written(value.denominator, deeper)]}
    raise _Unkept(kind.__name__)


def _read(value: Any) -> Any:
    if not isinstance(value, dict):
        if isinstance(value, list):  # never written bare
            raise TypeError("a bare list")
        return value
    ((tag, item),) = value.items()
    if tag == "b":
        return base64.b64decode(item, validate=True)
    if tag == "t":
        return tuple(_read(v) for v in item)
    if tag == "l":
        return [_read(v) for v in item]
    if tag == "d":
        return {_read(k): _read(v) for k, v in item}
    if tag == "r":
        from PIL.TiffImagePlugin import IFDRational

        return IFDRational(_read(item[0]), _read(item[1]))
    raise KeyError(tag)


def _rational_type() -> Any:
    """``PIL.TiffImagePlugin.IFDRational`` where PIL's TIFF plugin is loaded (no image holds
    one before)."""
    module = sys.modules.get("PIL.TiffImagePlugin")
    return None if module is None else module.IFDRational

"""What a value is, without its data, and the header text that says it.

A chain's intermediate value is described by its :class:`Meta` (what a deferred intermediate
answers, ``shape``, ``dtype``, ``size``, ``mode``, without being computed); a stored value's
header (:mod:`codedag.store.entry`) opens with the same fields.
"""

from __future__ import annotations

import json
import re
import sys
from typing import Any, NamedTuple

import numpy as np

PIL_MODES = frozenset({"L", "RGB", "RGBA", "I", "F", "LA", "CMYK", "YCbCr", "HSV"})
"""PIL modes whose pixels ``numpy.asarray`` and ``Image.fromarray`` round-trip exactly."""


class Meta(NamedTuple):
    """What an intermediate value is, without its data (a named tuple: a chain makes one per
    call, and a tuple is built and hashed in C).

    Attributes:
        kind: ``ndarray``, ``tensor``, ``pil`` or ``other``.
        shape: array shape (for a PIL image: ``(height, width[, bands])``; for a tuple or list:
            ``(length,)``).
        dtype: NumPy dtype name (``uint8``); ``""`` for ``other``.
        mode: the PIL mode (``RGB``); ``""`` otherwise.
        type_name: the value's type, for ``other``.
    """

    kind: str
    shape: tuple[int, ...] = ()
    dtype: str = ""
    mode: str = ""
    type_name: str = ""

    @property
    def size(self) -> tuple[int, int]:
        """A PIL image's ``(width, height)``."""
        return (self.shape[1], self.shape[0]) if len(self.shape) >= 2 else (0, 0)

    def to_bytes(self) -> bytes:
        """The header form (remembered: a data set's values share a few headers)."""
        raw = _HEADERS.get(self)
        if raw is None:
            dtype = f',"dtype":{_quoted(self.dtype)}'
            raw = f"{opening(self)}{dtype}{extras(self)}}}".encode()
            remember(_HEADERS, self, raw)
        return raw

    @classmethod
    def from_bytes(cls, raw: bytes | memoryview) -> Meta:
        """Read a header written by :meth:`to_bytes` (or by :func:`encode`)."""
        raw = bytes(raw)
        meta = _METAS.get(raw)
        if meta is None:
            data = json.loads(raw)
            meta = cls(
                kind=str(data["kind"]),
                shape=tuple(int(x) for x in data.get("shape", ())),
                dtype=str(data.get("dtype", "")),
                mode=str(data.get("mode", "")),
                type_name=str(data.get("type", "")),
            )
            remember(_METAS, raw, meta)
        return meta


_PLAIN = re.compile(r"[ !#-\[\]-~]*")
"""Printable ASCII without quotes or backslashes: JSON writes such a string as it is."""


def _quoted(text: str) -> str:
    """``text`` as JSON writes it (the same as ``json.dumps``)."""
    return f'"{text}"' if _PLAIN.fullmatch(text) else json.dumps(text)


_HEADERS: dict[Meta, bytes] = {}
_METAS: dict[bytes, Meta] = {}
_REMEMBERED = 4096
"""Headers remembered each way (a data set of varied image sizes has one per size)."""


def remember(table: dict[Any, Any], key: Any, value: Any) -> None:
    if len(table) >= _REMEMBERED:
        table.clear()
    table[key] = value


def pil_image_type() -> Any:
    """``PIL.Image.Image`` once PIL is imported (no value can be an image before), else None."""
    module = sys.modules.get("PIL.Image")
    return None if module is None else module.Image


def torch_tensor_type() -> Any:
    torch = sys.modules.get("torch")
    return None if torch is None else torch.Tensor


_DTYPE_STRS: dict[np.dtype[Any], str] = {}


def dtype_str(dtype: np.dtype[Any]) -> str:
    """``dtype.str`` (``"|u1"``), remembered: NumPy builds the string on every read (0.5 us)."""
    text = _DTYPE_STRS.get(dtype)
    if text is None:
        text = dtype.str
        remember(_DTYPE_STRS, dtype, text)
    return text


_ARRAY_METAS: dict[tuple[Any, ...], Meta] = {}


_PIL_TYPES: set[type] = set()
"""Exact types found to be PIL images (``JpegImageFile``, ``Image``): checked first."""


def meta_of(value: Any) -> Meta:
    """The :class:`Meta` of a concrete value (arrays' and tensors' remembered by shape and
    dtype: every sample of a data set makes the same few)."""
    if type(value) in _PIL_TYPES:
        return pil_meta(value)
    if isinstance(value, np.ndarray):
        key = (value.shape, value.dtype)  # the dtype object: hashed in C, no string built
        found = _ARRAY_METAS.get(key)
        if found is None:
            found = Meta("ndarray", tuple(value.shape), dtype_str(value.dtype))
            remember(_ARRAY_METAS, key, found)
        return found
    image = pil_image_type()
    if image is not None and isinstance(value, image):
        if len(_PIL_TYPES) < 64:
            _PIL_TYPES.add(type(value))
        return pil_meta(value)
    tensor = torch_tensor_type()
    if tensor is not None and isinstance(value, tensor):
        shape = tuple(value.shape)
        found = _ARRAY_METAS.get(("tensor", shape, value.dtype))
        if found is None:
            found = Meta("tensor", shape, str(value.dtype).removeprefix("torch."))
            remember(_ARRAY_METAS, ("tensor", shape, value.dtype), found)
        return found
    name = f"{type(value).__module__}.{type(value).__qualname__}"
    if type(value) in (tuple, list):  # its length: unpacked as steps (``_, mask = cv2.threshold``)
        return Meta("other", (len(value),), type_name=name)
    return Meta("other", type_name=name)


_PIL_METAS: dict[tuple[str, tuple[int, int]], Meta] = {}


def pil_meta(image: Any) -> Meta:
    """The :class:`Meta` of a PIL image, remembered by mode and size (a chain makes one per
    call, and the bands of a mode are looked up in Python)."""
    mode, size = image.mode, image.size
    found = _PIL_METAS.get((mode, size))
    if found is None:
        width, height = size
        bands = len(image.getbands())
        shape = (height, width) if bands == 1 else (height, width, bands)
        found = Meta("pil", shape, "", mode)
        remember(_PIL_METAS, (mode, size), found)
    return found


def opening(meta: Meta) -> str:
    """A header's text up to its first optional field: ``{"kind":...,"shape":[...]``."""
    dims = ",".join([str(int(n)) for n in meta.shape])
    return f'{{"kind":{_quoted(meta.kind)},"shape":[{dims}]'


def extras(meta: Meta) -> str:
    """A header's optional fields, as written: ``,"mode":...`` and ``,"type":...`` when set."""
    mode = f',"mode":{_quoted(meta.mode)}' if meta.mode else ""
    return mode + (f',"type":{_quoted(meta.type_name)}' if meta.type_name else "")

"""How a cached value is written and read back: a small header and the raw buffer.

Values the cache keeps: NumPy arrays (any fixed-size dtype), torch CPU tensors (through NumPy) and
PIL images of the modes NumPy round-trips exactly (``L``, ``RGB``, ``RGBA``, ``I``, ``F`` and a few
more). The header says which, with dtype, shape, the PIL mode, and a tag: a keyed 128-bit xxh3 of
the value's key, its header and its bytes, seeded from the store's secret key and begun with the
key's 32 bytes (:func:`codedag.store.trust.secret`). Reading checks the tag (tens of GB/s: a few
us for 49 KB) and returns a private, writable copy: user code may write into what it receives,
and the shared map stays read-only. Without the key no tag verifies: another store's file or a
value moved to another key is refused. The keyed hash is not a cryptographic MAC: the store's
private folder (0700, checked, :mod:`codedag.store.trust`) keeps other users from its files and
its key, and the tag is checked at the speed of a checksum, so a hit still saves what it should
(HMAC-SHA256 cost 0.3 ms per 640 KB value, more than storing a large value saved).

The header opens as a :class:`~codedag.store.meta.Meta`'s does; an array's records the order its
axes lie in memory (:mod:`codedag.store.memory_order`), an image's whether its ``info`` follows
its pixels (:mod:`codedag.store.image_info`).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import sys
from typing import Any, NamedTuple

import numpy as np
import xxhash

from codedag.store.image_info import info_bytes, info_from_bytes
from codedag.store.memory_order import Order, in_memory_order, laid_out
from codedag.store.meta import (
    PIL_MODES,
    Meta,
    dtype_str,
    extras,
    meta_of,
    opening,
    pil_image_type,
    pil_meta,
    remember,
    torch_tensor_type,
)


class CorruptEntry(Exception):
    """A stored value whose bytes do not match its tag or header."""


def _stored_array(value: Any) -> tuple[np.ndarray, Order | None] | None:
    """The contiguous array the store keeps of ``value`` and the order its axes lie in memory
    (None: C order), or None when it cannot be kept exactly: a subclass whose type changes
    what is computed from it (a masked array's mask, a matrix's ``*``, a ``Parameter``) is not
    kept; a memory-mapped array is kept as the array it maps."""
    if type(value) is np.ndarray or type(value) is np.memmap:
        if value.dtype.hasobject or value.dtype.kind == "V":
            return None
        return in_memory_order(value)
    tensor = torch_tensor_type()
    if tensor is not None and type(value) is tensor:
        if value.device.type != "cpu" or value.requires_grad or value.is_sparse:
            return None
        try:
            return in_memory_order(value.detach().numpy())
        except (TypeError, RuntimeError):  # bfloat16 and other dtypes NumPy lacks
            return None
    image = pil_image_type()
    if image is not None and isinstance(value, image) and value.mode in PIL_MODES:
        return np.ascontiguousarray(np.asarray(value)), None
    return None


class Encoded(NamedTuple):
    """A value as the store keeps it (a named tuple: one is made per stored value, and a frozen
    dataclass's fields are set one ``object.__setattr__`` at a time).

    Attributes:
        header: the value's :class:`Meta` with the stored array's layout and tag (JSON).
        data: the array's bytes: a view of the value's own buffer where it is contiguous (no
            copy), so it changes if the value is written to before it is stored.
        tag: the keyed hash of the key, header and ``data`` when it was encoded (also in the
            header).
        sealer: the keyed hash fed with the key and header, ready for the bytes (to check
            them again when they are written: :meth:`intact`).
        owned: ``data`` is a copy no one else holds (a PIL image's pixels, a non-contiguous
            array made contiguous): it cannot change before it is stored.
    """

    header: bytes
    data: memoryview
    tag: bytes
    sealer: Any
    owned: bool = False

    @property
    def nbytes(self) -> int:
        """Bytes the entry takes in the store (data and header)."""
        return self.data.nbytes + len(self.header)

    def intact(self, data: memoryview | bytes) -> bool:
        """Whether ``data`` (the bytes written) still matches the tag taken at encoding."""
        return hmac.compare_digest(_tag(self.sealer, data), self.tag)


TAG_HEX = 32
"""Hex digits of a value's tag (a keyed xxh3, 128 bits)."""
_HEADER_END = b'"}'
_KEYED: dict[bytes, Any] = {}
"""The keyed hash of each secret, before any input (copied: the key is set up once)."""


def sealer(secret: bytes, key: bytes, layout: bytes) -> Any:
    """The keyed hash of a value stored under ``key`` with the header opening ``layout``,
    ready for the value's bytes."""
    keyed = _KEYED.get(secret)
    if keyed is None:
        seed = int.from_bytes(hashlib.blake2b(secret, digest_size=8).digest(), "little")
        keyed = xxhash.xxh3_128(secret, seed=seed)
        remember(_KEYED, secret, keyed)
    hashing = keyed.copy()
    hashing.update(len(key).to_bytes(4, "little") + key + layout)
    return hashing


def _tag(sealer: Any, data: memoryview | bytes) -> bytes:
    hashing = sealer.copy()
    hashing.update(data)
    return hashing.hexdigest()[:TAG_HEX].encode()


def encode(value: Any, secret: bytes, key: bytes, copy: bool = False) -> Encoded | None:
    """How a value the cache can keep exactly is stored under ``key``, tagged with ``secret``
    (the store's key), else None; ``copy``: its bytes copied now, where the code that receives
    the value writes into it before the writer would store it."""
    image = pil_image_type()
    if image is not None and isinstance(value, image):
        packed = _pil_packed(value)
        if packed is None:
            return None
        data, layout = packed
        owned = True  # packed bytes of its own
    else:
        stored = _stored_array(value)
        if stored is None:
            return None
        array, order = stored
        meta = meta_of(value)
        data = memoryview(array).cast("B") if array.size else memoryview(b"")  # type: ignore[arg-type]
        found = _LAYOUTS.get((meta, array.dtype, array.shape, order))
        layout = _layout(meta, array, order) if found is None else found
        owned = not _shares_memory(array, value)
        if copy and not owned:
            data, owned = memoryview(bytes(data)), True
    sealing = sealer(secret, key, layout)
    tag = _tag(sealing, data)
    return Encoded(layout + tag + _HEADER_END, data, tag, sealing, owned)


_PIL_LAYOUTS: dict[tuple[Meta, bool], tuple[bytes, int]] = {}
"""Each image header's opening up to its tag, and its pixels' bytes."""


def _pil_packed(image: Any) -> tuple[memoryview, bytes] | None:
    """A PIL image's pixels as ``numpy.asarray`` holds them, then its ``info`` and the info's
    length in 4 bytes where it has one, and its header's opening; None for a mode NumPy does
    not round-trip exactly, or an ``info`` the store cannot keep."""
    if image.mode not in PIL_MODES:
        return None
    info = info_bytes(image.info) if image.info else b""
    if info is None:
        return None
    layout, nbytes = _pil_stored(image, bool(info))
    pixels = _pil_bytes(image, nbytes)
    if info:
        pixels = b"".join((pixels, info, len(info).to_bytes(4, "little")))
    return memoryview(pixels), layout


_INFO_FIELD = ',"info":true'
"""The header field of an image whose data ends with its ``info``."""


def _pil_stored(image: Any, with_info: bool = False) -> tuple[bytes, int]:
    """The header opening and the pixels' bytes of an image of a mode the store keeps
    (remembered by mode, size and whether its ``info`` follows the pixels)."""
    meta = pil_meta(image)
    found = _PIL_LAYOUTS.get((meta, with_info))
    if found is None:
        found = _pil_layout(image, meta, _INFO_FIELD if with_info else "")
        remember(_PIL_LAYOUTS, (meta, with_info), found)
    return found


def value_nbytes(value: Any) -> int:
    """The bytes of a value's data as the store keeps it: an array's or a tensor's, a PIL
    image's pixels as ``numpy.asarray`` holds them (0 for anything else)."""
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    image = pil_image_type()
    if image is None or not isinstance(value, image) or value.mode not in PIL_MODES:
        return 0
    return _pil_stored(value)[1]


def _pil_layout(image: Any, meta: Meta, fields: str) -> tuple[bytes, int]:
    """The header opening of an image stored as ``numpy.asarray`` reads it, and its bytes: the
    array's dtype and shape as PIL gives NumPy them (its mode's type and bands)."""
    from PIL import ImageMode  # imported with PIL.Image

    mode = ImageMode.getmode(image.mode)
    dtype = np.dtype(mode.typestr)
    shape = meta.shape  # (height, width[, bands]), as NumPy's array of the image
    count = 1
    for n in shape:
        count *= n
    return _layout_of(meta, dtype_str(dtype), shape, fields), count * dtype.itemsize


def _pil_bytes(image: Any, nbytes: int) -> bytes:
    """``image.tobytes()`` packed by one call of PIL's raw encoder into a buffer of the image's
    size: ``tobytes`` packs blocks of 64 KB and joins them, a second copy of every byte (a
    lazily loaded file's image, or any surprise, takes ``tobytes``)."""
    module = sys.modules.get("PIL.ImageFile")
    if nbytes and not (module is not None and isinstance(image, module.ImageFile)):
        try:
            encoder = sys.modules["PIL.Image"]._getencoder(image.mode, "raw", image.mode)
            try:
                encoder.setimage(image.im, (0, 0, *image.size))
                _consumed, status, raw = encoder.encode(nbytes)
            finally:
                encoder.cleanup()
            if status == 1 and len(raw) == nbytes:  # every line, in the one buffer
                return raw
        except Exception:  # PIL's internals moved: its public way
            pass
    return image.tobytes()


_LAYOUTS: dict[tuple[Meta, np.dtype[Any], tuple[int, ...], Order | None], bytes] = {}
"""Each header's opening, up to its tag (a data set's values share a few)."""


def _layout(meta: Meta, array: np.ndarray, order: Order | None) -> bytes:
    """The header of ``meta`` stored as ``array`` whose axes lie in ``order``, up to the tag:
    the value's Meta with the stored array's layout."""
    layout = _layout_of(meta, dtype_str(array.dtype), array.shape, order and order.fields())
    remember(_LAYOUTS, (meta, array.dtype, array.shape, order), layout)
    return layout


def _layout_of(meta: Meta, dtype: str, shape: tuple[int, ...], fields: str | None = "") -> bytes:
    """The header of ``meta`` stored as an array of ``dtype`` (its ``str``) and ``shape`` (the
    shape in memory order), up to the tag: the fields of :meth:`Meta.to_bytes` but its dtype,
    in its order and spelling (as ``json.dumps`` writes them), then the array's and ``fields``
    (how its axes lie in memory, where not in C order; an image's ``info`` after its pixels).
    Written directly: a data set of images of many sizes makes a new header for nearly every
    value."""
    array_shape = ",".join([str(int(n)) for n in shape])
    array = f',"dtype":"{dtype}","array_shape":[{array_shape}]{fields or ""},"tag":"'
    return f"{opening(meta)}{extras(meta)}{array}".encode()


def _shares_memory(array: np.ndarray, value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return array is value or np.shares_memory(array, value)
    return not (pil_image_type() is not None and isinstance(value, pil_image_type()))


class _ReadLayout(NamedTuple):
    """What a header says of its value: kind, dtype, shape (in memory order), element count, PIL
    mode, the order its axes lie in memory (None: C order) and whether an image's ``info``
    follows its pixels."""

    kind: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    items: int
    mode: Any
    order: Order | None
    info: bool


_READ_LAYOUTS: dict[bytes, _ReadLayout] = {}
"""The layout of each header read (its bytes before the tag)."""


def _read_layout(header: bytes) -> _ReadLayout:
    info = json.loads(header)
    shape = tuple(int(x) for x in info["array_shape"])
    order = None
    if "axes" in info:
        try:
            order = Order.read(info["axes"], info["flipped"], len(shape))
        except ValueError as error:
            raise CorruptEntry(str(error)) from None
    return _ReadLayout(
        info["kind"],
        np.dtype(info["dtype"]),
        shape,
        math.prod(shape),
        info.get("mode"),
        order,
        info.get("info") is True,
    )


def decode(header: bytes, data: memoryview, secret: bytes, key: bytes) -> Any:
    """A private copy of the value stored under ``key`` as ``(header, data)``, once its tag
    verifies under ``secret``.

    Raises:
        CorruptEntry: the tag does not verify (the value was not stored by this cache with this
            key, or was altered), or the data does not match the header's size.
    """
    end = len(header) - len(_HEADER_END)
    if end < TAG_HEX or header[end:] != _HEADER_END:
        raise CorruptEntry("its header carries no tag")
    tag = header[end - TAG_HEX : end]
    layout = header[: end - TAG_HEX]
    if not hmac.compare_digest(_tag(sealer(secret, key, layout), data), tag):
        raise CorruptEntry("its tag does not verify")
    read = _READ_LAYOUTS.get(layout)
    if read is None:  # values of one chain share their layout: parsed once
        read = _read_layout(header)
        remember(_READ_LAYOUTS, layout, read)
    kind, dtype, shape, count, mode, order, with_info = read  # count: the elements
    nbytes = count * dtype.itemsize
    if kind == "pil" and with_info:
        return _pil_value(mode, shape, *_pixels_and_info(data, nbytes))
    if nbytes != data.nbytes:
        raise CorruptEntry(f"{data.nbytes} bytes for {shape} {dtype}")
    if kind == "pil":
        return _pil_value(mode, shape, data, {})
    array = np.frombuffer(data, dtype=dtype, count=count).reshape(shape).copy()
    if order is not None:
        array = laid_out(array, order)
    if kind == "tensor":
        import torch

        return torch.from_numpy(array)
    return array


def _pixels_and_info(data: memoryview, nbytes: int) -> tuple[memoryview, dict[Any, Any]]:
    """An image's pixels (``nbytes``) and its ``info`` from the data that holds both."""
    size = int.from_bytes(data[-4:], "little") if data.nbytes >= 4 else -1
    if size < 0 or nbytes + size + 4 != data.nbytes:
        raise CorruptEntry(f"{data.nbytes} bytes for {nbytes} of pixels and an info")
    try:
        return data[:nbytes], info_from_bytes(bytes(data[nbytes : nbytes + size]))
    except ValueError as error:
        raise CorruptEntry(str(error)) from None


def _pil_value(mode: Any, shape: tuple[int, ...], pixels: memoryview, info: dict[Any, Any]) -> Any:
    from PIL import Image

    if mode not in PIL_MODES or len(shape) < 2:
        raise CorruptEntry(f"PIL mode {mode!r}")
    image = Image.frombytes(mode, (shape[1], shape[0]), pixels)
    image.info = info
    return image


def same(a: Any, b: Any) -> bool:
    """Whether two values are equal bit for bit (type, dtype, shape, mode, data, the order their
    axes lie in memory and an image's ``info``)."""
    if meta_of(a) != meta_of(b) or getattr(a, "info", None) != getattr(b, "info", None):
        return False
    stored_a, stored_b = _stored_array(a), _stored_array(b)
    if stored_a is None or stored_b is None or stored_a[1] != stored_b[1]:
        return False
    return stored_a[0].tobytes() == stored_b[0].tobytes()

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

The same header, without data, describes an intermediate value of a chain (:class:`Meta`): what a
deferred intermediate answers (``shape``, ``dtype``, ``size``, ``mode``) without being computed.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import math
import re
import sys
from typing import Any, NamedTuple

import numpy as np
import xxhash

PIL_MODES = frozenset({"L", "RGB", "RGBA", "I", "F", "LA", "CMYK", "YCbCr", "HSV"})
"""PIL modes whose pixels ``numpy.asarray`` and ``Image.fromarray`` round-trip exactly."""


class CorruptEntry(Exception):
    """A stored value whose bytes do not match its tag or header."""


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
            raw = f"{_opening(self)}{dtype}{_extras(self)}}}".encode()
            _remember(_HEADERS, self, raw)
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
            _remember(_METAS, raw, meta)
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


def _remember(table: dict[Any, Any], key: Any, value: Any) -> None:
    if len(table) >= _REMEMBERED:
        table.clear()
    table[key] = value


def _pil_image_type() -> Any:
    """``PIL.Image.Image`` once PIL is imported (no value can be an image before), else None."""
    module = sys.modules.get("PIL.Image")
    return None if module is None else module.Image


def _torch_tensor_type() -> Any:
    torch = sys.modules.get("torch")
    return None if torch is None else torch.Tensor


_DTYPE_STRS: dict[np.dtype[Any], str] = {}


def dtype_str(dtype: np.dtype[Any]) -> str:
    """``dtype.str`` (``"|u1"``), remembered: NumPy builds the string on every read (0.5 us)."""
    text = _DTYPE_STRS.get(dtype)
    if text is None:
        text = dtype.str
        _remember(_DTYPE_STRS, dtype, text)
    return text


_ARRAY_METAS: dict[tuple[Any, ...], Meta] = {}


_PIL_TYPES: set[type] = set()
"""Exact types found to be PIL images (``JpegImageFile``, ``Image``): checked first."""


def meta_of(value: Any) -> Meta:
    """The :class:`Meta` of a concrete value (arrays' and tensors' remembered by shape and
    dtype: every sample of a data set makes the same few)."""
    if type(value) in _PIL_TYPES:
        return _pil_meta(value)
    if isinstance(value, np.ndarray):
        key = (value.shape, value.dtype)  # the dtype object: hashed in C, no string built
        found = _ARRAY_METAS.get(key)
        if found is None:
            found = Meta("ndarray", tuple(value.shape), dtype_str(value.dtype))
            _remember(_ARRAY_METAS, key, found)
        return found
    image = _pil_image_type()
    if image is not None and isinstance(value, image):
        if len(_PIL_TYPES) < 64:
            _PIL_TYPES.add(type(value))
        return _pil_meta(value)
    tensor = _torch_tensor_type()
    if tensor is not None and isinstance(value, tensor):
        shape = tuple(value.shape)
        found = _ARRAY_METAS.get(("tensor", shape, value.dtype))
        if found is None:
            found = Meta("tensor", shape, str(value.dtype).removeprefix("torch."))
            _remember(_ARRAY_METAS, ("tensor", shape, value.dtype), found)
        return found
    name = f"{type(value).__module__}.{type(value).__qualname__}"
    if type(value) in (tuple, list):  # its length: unpacked as steps (``_, mask = cv2.threshold``)
        return Meta("other", (len(value),), type_name=name)
    return Meta("other", type_name=name)


_PIL_METAS: dict[tuple[str, tuple[int, int]], Meta] = {}


def _pil_meta(image: Any) -> Meta:
    """The :class:`Meta` of a PIL image, remembered by mode and size (a chain makes one per
    call, and the bands of a mode are looked up in Python)."""
    mode, size = image.mode, image.size
    found = _PIL_METAS.get((mode, size))
    if found is None:
        width, height = size
        bands = len(image.getbands())
        shape = (height, width) if bands == 1 else (height, width, bands)
        found = Meta("pil", shape, "", mode)
        _remember(_PIL_METAS, (mode, size), found)
    return found


class _Order(NamedTuple):
    """How an array's axes lie in memory, where that is not NumPy's default (C order).

    Attributes:
        axes: the axes from the largest step in memory to the smallest (``(1, 2, 0)`` for a
            ``(3, H, W)`` view of an ``(H, W, 3)`` image).
        flipped: the axes that run backwards in memory (``image[:, ::-1]``).
    """

    axes: tuple[int, ...]
    flipped: tuple[int, ...]


def _stored_array(value: Any) -> tuple[np.ndarray, _Order | None] | None:
    """The contiguous array the store keeps of ``value`` and the order its axes lie in memory
    (None: C order), or None when it cannot be kept exactly."""
    if isinstance(value, np.ndarray):
        if value.dtype.hasobject or value.dtype.kind == "V":
            return None
        return _in_memory_order(value)
    tensor = _torch_tensor_type()
    if tensor is not None and isinstance(value, tensor):
        if value.device.type != "cpu" or value.requires_grad or value.is_sparse:
            return None
        try:
            return _in_memory_order(value.detach().numpy())
        except (TypeError, RuntimeError):  # bfloat16 and other dtypes NumPy lacks
            return None
    image = _pil_image_type()
    if image is not None and isinstance(value, image) and value.mode in PIL_MODES:
        return np.ascontiguousarray(np.asarray(value)), None
    return None


def _in_memory_order(array: np.ndarray) -> tuple[np.ndarray, _Order | None]:
    """``array``'s elements in the order they lie in memory, contiguous (``array`` itself where
    it is C-contiguous, else a copy, which code writing into the value cannot change before it
    is stored), and that order.

    A value keeps its layout through the store: what NumPy and torch compute from it follows the
    layout (``np.stack`` of ``(3, H, W)`` views of ``(H, W, 3)`` images is channels-last in
    memory, and torch's convolutions take another path on it, rounding differently). Never
    ``np.ascontiguousarray`` of a 0-d array, which makes it 1-d (a label read back as ``[3]``,
    which ``int()`` refuses)."""
    if array.flags.c_contiguous:
        return array, None
    strides = array.strides
    flipped = tuple(i for i, n in enumerate(array.shape) if n > 1 and strides[i] < 0)
    if flipped:
        steps = [slice(None)] * array.ndim
        for axis in flipped:
            steps[axis] = slice(None, None, -1)
        array = array[tuple(steps)]
    axes = tuple(sorted(range(array.ndim), key=lambda i: -abs(strides[i])))
    order = _Order(axes, flipped)
    if order == _Order(tuple(range(array.ndim)), ()):
        return np.ascontiguousarray(array), None
    return np.array(array.transpose(axes), order="C"), order


def _laid_out(array: np.ndarray, order: _Order) -> np.ndarray:
    """A contiguous ``array`` read back as the view that lays its axes out in ``order``."""
    inverse = [0] * len(order.axes)
    for position, axis in enumerate(order.axes):
        inverse[axis] = position
    array = array.transpose(inverse)
    if order.flipped:
        steps = [slice(None)] * array.ndim
        for axis in order.flipped:
            steps[axis] = slice(None, None, -1)
        array = array[tuple(steps)]
    return array


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
        _remember(_KEYED, secret, keyed)
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
    image = _pil_image_type()
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


_PIL_LAYOUTS: dict[Meta, tuple[bytes, int]] = {}
"""Each image header's opening up to its tag, and its pixels' bytes."""


def _pil_packed(image: Any) -> tuple[memoryview, bytes] | None:
    """A PIL image's pixels as ``numpy.asarray`` holds them, and its header's opening; None for
    a mode NumPy does not round-trip exactly."""
    if image.mode not in PIL_MODES:
        return None
    layout, nbytes = _pil_stored(image)
    return memoryview(_pil_bytes(image, nbytes)), layout


def _pil_stored(image: Any) -> tuple[bytes, int]:
    """The header opening and the bytes of an image of a mode the store keeps (remembered by
    mode and size)."""
    meta = _pil_meta(image)
    found = _PIL_LAYOUTS.get(meta)
    if found is None:
        found = _pil_layout(image, meta)
        _remember(_PIL_LAYOUTS, meta, found)
    return found


def value_nbytes(value: Any) -> int:
    """The bytes of a value's data as the store keeps it: an array's or a tensor's, a PIL
    image's pixels as ``numpy.asarray`` holds them (0 for anything else)."""
    nbytes = getattr(value, "nbytes", None)
    if isinstance(nbytes, int):
        return nbytes
    image = _pil_image_type()
    if image is None or not isinstance(value, image) or value.mode not in PIL_MODES:
        return 0
    return _pil_stored(value)[1]


def _pil_layout(image: Any, meta: Meta) -> tuple[bytes, int]:
    """The header opening of an image stored as ``numpy.asarray`` reads it, and its bytes: the
    array's dtype and shape as PIL gives NumPy them (its mode's type and bands)."""
    from PIL import ImageMode  # imported with PIL.Image

    mode = ImageMode.getmode(image.mode)
    dtype = np.dtype(mode.typestr)
    shape = meta.shape  # (height, width[, bands]), as NumPy's array of the image
    count = 1
    for n in shape:
        count *= n
    return _layout_of(meta, dtype_str(dtype), shape), count * dtype.itemsize


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


_LAYOUTS: dict[tuple[Meta, np.dtype[Any], tuple[int, ...], _Order | None], bytes] = {}
"""Each header's opening, up to its tag (a data set's values share a few)."""


def _layout(meta: Meta, array: np.ndarray, order: _Order | None) -> bytes:
    """The header of ``meta`` stored as ``array`` whose axes lie in ``order``, up to the tag:
    the value's Meta with the stored array's layout."""
    layout = _layout_of(meta, dtype_str(array.dtype), array.shape, order)
    _remember(_LAYOUTS, (meta, array.dtype, array.shape, order), layout)
    return layout


def _layout_of(
    meta: Meta, dtype: str, shape: tuple[int, ...], order: _Order | None = None
) -> bytes:
    """The header of ``meta`` stored as an array of ``dtype`` (its ``str``) and ``shape`` (the
    shape in memory order), up to the tag: the fields of :meth:`Meta.to_bytes` but its dtype,
    in its order and spelling (as ``json.dumps`` writes them), then the array's, and its axes'
    order where it is not C order. Written directly: a data set of images of many sizes makes a
    new header for nearly every value."""
    array_shape = ",".join([str(int(n)) for n in shape])
    laid = ""
    if order is not None:
        axes = ",".join([str(n) for n in order.axes])
        flipped = ",".join([str(n) for n in order.flipped])
        laid = f',"axes":[{axes}],"flipped":[{flipped}]'
    array = f',"dtype":"{dtype}","array_shape":[{array_shape}]{laid},"tag":"'
    return f"{_opening(meta)}{_extras(meta)}{array}".encode()


def _opening(meta: Meta) -> str:
    """A header's text up to its first optional field: ``{"kind":...,"shape":[...]``."""
    dims = ",".join([str(int(n)) for n in meta.shape])
    return f'{{"kind":{_quoted(meta.kind)},"shape":[{dims}]'


def _extras(meta: Meta) -> str:
    """A header's optional fields, as written: ``,"mode":...`` and ``,"type":...`` when set."""
    mode = f',"mode":{_quoted(meta.mode)}' if meta.mode else ""
    return mode + (f',"type":{_quoted(meta.type_name)}' if meta.type_name else "")


def _shares_memory(array: np.ndarray, value: Any) -> bool:
    if isinstance(value, np.ndarray):
        return array is value or np.shares_memory(array, value)
    return not (_pil_image_type() is not None and isinstance(value, _pil_image_type()))


class _ReadLayout(NamedTuple):
    """What a header says of its value: kind, dtype, shape (in memory order), element count, PIL
    mode and the order its axes lie in memory (None: C order)."""

    kind: str
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    items: int
    mode: Any
    order: _Order | None


_READ_LAYOUTS: dict[bytes, _ReadLayout] = {}
"""The layout of each header read (its bytes before the tag)."""


def _read_layout(header: bytes) -> _ReadLayout:
    info = json.loads(header)
    shape = tuple(int(x) for x in info["array_shape"])
    order = None
    if "axes" in info:
        axes = tuple(int(x) for x in info["axes"])
        flipped = tuple(int(x) for x in info["flipped"])
        if sorted(axes) != list(range(len(shape))) or not set(flipped) <= set(axes):
            raise CorruptEntry(f"axes {axes} flipped {flipped} for {len(shape)} dimensions")
        order = _Order(axes, flipped)
    return _ReadLayout(
        info["kind"], np.dtype(info["dtype"]), shape, math.prod(shape), info.get("mode"), order
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
        _remember(_READ_LAYOUTS, layout, read)
    kind, dtype, shape, count, mode, order = read  # count: the elements
    if count * dtype.itemsize != data.nbytes:
        raise CorruptEntry(f"{data.nbytes} bytes for {shape} {dtype}")
    if kind == "pil":
        from PIL import Image

        if mode not in PIL_MODES or len(shape) < 2:
            raise CorruptEntry(f"PIL mode {mode!r}")
        return Image.frombytes(mode, (shape[1], shape[0]), data)
    array = np.frombuffer(data, dtype=dtype, count=count).reshape(shape).copy()
    if order is not None:
        array = _laid_out(array, order)
    if kind == "tensor":
        import torch

        return torch.from_numpy(array)
    return array


def same(a: Any, b: Any) -> bool:
    """Whether two values are equal bit for bit (type, dtype, shape, mode, data and the order
    their axes lie in memory)."""
    if meta_of(a) != meta_of(b):
        return False
    stored_a, stored_b = _stored_array(a), _stored_array(b)
    if stored_a is None or stored_b is None or stored_a[1] != stored_b[1]:
        return False
    return stored_a[0].tobytes() == stored_b[0].tobytes()

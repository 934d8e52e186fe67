"""A cached value's key is its provenance: the source, each call and its arguments, the versions.

``key(source) = h(chain, source function, versions, identity(source))`` and, for each call of
the chain,
``key(result) = h(key(input), call name, arguments)``, where ``h`` is xxh3-128 and:

* a file named by a path (``str``, ``os.PathLike``) or an open file is identified by its real
  path, size, modification time (ns), inode and device: editing or replacing it is a miss. The
  numbers are read through the path on every lookup (a link pointed elsewhere names another
  inode); the real path of its folder is resolved once per folder and process. A file that is
  gone or that this process may not read has no identity: the call runs, and fails as it does
  without the cache;
* an array mapped read-only from a file (``np.load(path, mmap_mode="r")``, and any view of it)
  by the file's identity and where in the mapping its bytes lie, so that indexing a large
  mapped array per sample reads nothing to key it;
* an in-memory buffer (``bytes``, ``bytearray``, ``memoryview``, a NumPy array, a CPU tensor) by
  a hash of its bytes with its dtype and shape; an immutable ``bytes`` object's hash is kept per
  object while it lives (a data set's encoded images are hashed once per process); an in-memory
  binary stream (``io.BytesIO(open(path, "rb").read())``) by a hash of its bytes and its
  position;
* arguments by their value: numbers, strings, ``None``, enums, dtypes, tuples, lists and dicts of
  them, classes of Python and of the libraries below (``ImageFilter.SMOOTH``) by their names, a
  library's plain objects (``ImageFilter.GaussianBlur(2)``) by their class and attributes, the
  functions of Python and of those libraries by their names (``ref=np.max``), and arrays by a
  hash of their bytes. Anything else (an open handle, a user object, a
  function) has no stable value: the chain is not cached and says so;
* versions: of torch and of the distributions every library package of
  :mod:`codedag.backends.ops` declares (NumPy, OpenCV, Pillow, librosa, SciPy) where installed,
  and of the cache's format.
"""

from __future__ import annotations

import enum
import io
import mmap
import os
import struct
import threading
from collections import OrderedDict
from stat import S_ISLNK
from typing import Any

import numpy as np
import xxhash

import codedag.backends.libraries as libraries
from codedag.store.memory_order import in_memory_order
from codedag.store.meta import dtype_str
from codedag.version import distribution_version

FORMAT_VERSION = 5
"""The cache's format, part of every key: entries of another format are never looked up (2: values
tagged with the store's secret key instead of an xxh3 checksum; 3: the tag a keyed xxh3, not
HMAC-SHA256; 4: a source's key names its source call; 5: an array keeps the order its axes lie in
memory, an image its ``info``)."""
_MEMO_ENTRIES = 200_000


class Unkeyable(Exception):
    """A value without a stable identity (its reason is the message)."""


_versions: bytes | None = None


def versions() -> bytes:
    """The library versions a cached value depends on, as bytes (computed once per process)."""
    global _versions
    if _versions is None:
        parts = [f"format={FORMAT_VERSION}"]
        for name in libraries.all_distributions():
            installed = distribution_version(name)
            if installed is not None:
                parts.append(f"{name}={installed}")
        _versions = ";".join(parts).encode()
    return _versions


class _BytesMemo:
    """Hashes of immutable ``bytes`` objects by identity, holding each object while remembered
    (so its id cannot be reused by another object); least recently used forgotten first."""

    def __init__(self, capacity: int = _MEMO_ENTRIES) -> None:
        self.capacity = capacity
        self._items: OrderedDict[int, tuple[bytes, bytes]] = OrderedDict()
        self._lock = threading.Lock()

    def digest(self, data: bytes) -> bytes:
        key = id(data)
        with self._lock:
            hit = self._items.get(key)
            if hit is not None and hit[0] is data:
                self._items.move_to_end(key)
                return hit[1]
        digest = xxhash.xxh3_128_digest(data)
        with self._lock:
            self._items[key] = (data, digest)
            while len(self._items) > self.capacity:
                self._items.popitem(last=False)
        return digest


_MEMO = _BytesMemo()


def _array_identity(array: np.ndarray) -> bytes:
    """An array's dtype, shape, bytes and the order its axes lie in memory: what is computed
    from it follows its layout, and a value read back keeps the layout it was computed with."""
    if array.dtype.hasobject:
        raise Unkeyable("an array of Python objects")
    header = f"{dtype_str(array.dtype)}{array.shape}".encode()
    data, order = in_memory_order(array)
    if order is not None:
        header += order.fields().encode()
    raw = memoryview(data).cast("B") if data.size else b""  # type: ignore[arg-type]
    return header + xxhash.xxh3_128_digest(raw)


_REAL_FOLDERS: dict[str, str] = {}
"""Each folder's real path as first resolved: ``realpath`` costs an ``lstat`` per component,
and a data set's files sit in few folders (one entry per folder, not per file)."""


def _file_identity(path: str | os.PathLike[str]) -> bytes:
    name = os.fspath(path)
    try:
        # one system call for a file that is not a link (lstat and stat then agree); a link is
        # followed through the path as it is now: a retargeted link is another file
        stat = os.lstat(name)
        link = S_ISLNK(stat.st_mode)
        if link:
            stat = os.stat(name)
    except OSError as error:
        raise Unkeyable(f"cannot stat {name}: {error.strerror}") from None
    if not os.access(name, os.R_OK):  # the call then fails as it does without the cache
        raise Unkeyable(f"cannot read {name}")
    return _stat_identity(_real_path(name, link), stat)


def _real_path(name: str, link: bool) -> str:
    """``os.path.realpath(name)``, its folder's part remembered (``link``: the file itself is a
    symbolic link)."""
    folder, base = os.path.split(name)
    if link or base in ("", ".", ".."):
        return os.path.realpath(name)
    real = _REAL_FOLDERS.get(folder)
    if real is None:
        if len(_REAL_FOLDERS) >= _MEMO_ENTRIES:
            _REAL_FOLDERS.clear()
        real = _REAL_FOLDERS[folder] = os.path.realpath(folder or os.curdir)
    return os.path.join(real, base)


def _stat_identity(name: str, stat: os.stat_result) -> bytes:
    return (
        b"file:"
        + os.fsencode(name)
        + struct.pack("<qqqq", stat.st_size, stat.st_mtime_ns, stat.st_ino, stat.st_dev)
    )


def source_identity(value: Any) -> bytes:
    """The identity of a chain's source (see the module docstring).

    Raises:
        Unkeyable: the value has no stable identity.
    """
    if isinstance(value, bytes):
        return b"bytes:" + _MEMO.digest(value)
    if isinstance(value, bytearray | memoryview):
        return b"buffer:" + xxhash.xxh3_128_digest(value)
    if isinstance(value, str | os.PathLike):
        return _file_identity(value)
    if isinstance(value, np.ndarray):
        mapped = _mapped_identity(value)
        return mapped if mapped is not None else b"array:" + _array_identity(value)
    if isinstance(value, io.BytesIO):
        with value.getbuffer() as view:  # no copy; released, so the stream may grow again
            digest = xxhash.xxh3_128_digest(view)
        return b"stream:" + digest + struct.pack("<q", value.tell())
    fileno = getattr(value, "fileno", None)
    name = getattr(value, "name", None)
    if callable(fileno) and isinstance(name, str):
        try:
            stat = os.fstat(fileno())
            position = value.tell()
        except (OSError, ValueError, AttributeError):
            raise Unkeyable("an open file whose position or status cannot be read") from None
        return _stat_identity(os.path.realpath(name), stat) + struct.pack("<q", position)
    tensor = _tensor(value)
    if tensor is not None:
        return b"tensor:" + _array_identity(tensor)
    raise Unkeyable(f"a {type(value).__qualname__} source has no stable identity")


def _mapped_identity(array: np.ndarray) -> bytes | None:
    """The identity of an array mapped read-only from a file (``np.load(path, mmap_mode="r")``,
    or a view of one): the file's, and where in its mapping the array's bytes lie (their
    offset, dtype, shape and strides), without reading them. None for any other array (one
    mapped writable or copy-on-write may differ from its file: its bytes are hashed)."""
    if not isinstance(array, np.memmap) or getattr(array, "mode", None) != "r":
        return None
    name = getattr(array, "filename", None)
    mapping: Any = array
    while isinstance(mapping, np.ndarray):
        mapping = mapping.base
    if not isinstance(name, str | os.PathLike) or not isinstance(mapping, mmap.mmap):
        return None
    start = np.frombuffer(mapping, np.uint8).ctypes.data  # read-only: a view of the mapping
    where = struct.pack("<qq", int(getattr(array, "offset", 0)), array.ctypes.data - start)
    layout = f"{dtype_str(array.dtype)}{array.shape}{array.strides}".encode()
    return b"mapped:" + _file_identity(name) + where + layout


def _tensor(value: Any) -> np.ndarray | None:
    import sys

    torch = sys.modules.get("torch")
    if torch is None or not isinstance(value, torch.Tensor):
        return None
    if value.device.type != "cpu" or value.requires_grad:
        raise Unkeyable("a tensor on a device or one that requires grad")
    return value.detach().numpy()


SCALARS: dict[type, bytes] = {
    t: f"{t.__name__}:".encode() for t in (int, float, str, bool, type(None))
}
"""Exact scalar types and the opening of their encoding (the same bytes as the general case)."""


STAND_INS: list[type] = []
"""Types whose values stand for others (a chain's prefix values: they pass ``isinstance`` for
the type they stand for): never keyed by value where an argument nests one."""


def encode_argument(value: Any, out: list[bytes], depth: int = 0) -> None:
    """Append a stable encoding of an argument's value to ``out``.

    Raises:
        Unkeyable: the argument has no stable value.
    """
    if depth > 8:
        raise Unkeyable("an argument nested too deeply")
    kind = type(value)
    opening = SCALARS.get(kind)
    if opening is not None:  # the common cases first, by exact type: the same bytes
        out.append(opening + repr(value).encode() + b";")
    elif kind is tuple or kind is list:
        _encode_sequence(value, out, depth)
    elif kind is np.ndarray:
        out.append(b"array:" + _array_identity(value))
    elif kind in STAND_INS:
        raise Unkeyable("a value of a chain nested inside an argument")
    else:
        _encode_other(value, out, depth)


def _encode_sequence(value: tuple[Any, ...] | list[Any], out: list[bytes], depth: int) -> None:
    out.append(b"%s[%d](" % (type(value).__name__.encode(), len(value)))
    for item in value:
        encode_argument(item, out, depth + 1)
    out.append(b")")


def _encode_other(value: Any, out: list[bytes], depth: int) -> None:
    kind = type(value)
    if value is None or isinstance(value, bool | int | float | complex | str):
        out.append(f"{type(value).__name__}:{value!r};".encode())
    elif kind is slice:  # an index: img[:, :, ::-1], img[top:bottom]
        out.append(b"slice(")
        for part in (value.start, value.stop, value.step):
            encode_argument(part, out, depth + 1)
        out.append(b")")
    elif value is Ellipsis:
        out.append(b"ellipsis;")
    elif isinstance(value, enum.Enum):
        out.append(f"enum:{type(value).__qualname__}.{value.name}={value.value!r};".encode())
    elif isinstance(value, bytes):
        out.append(b"bytes:" + _MEMO.digest(value))
    elif isinstance(value, np.ndarray):
        out.append(b"array:" + _array_identity(value))
    elif isinstance(value, np.generic):
        out.append(f"np:{value.dtype.str}:{value!r};".encode())
    elif isinstance(value, np.dtype):
        out.append(f"dtype:{value.str};".encode())
    elif isinstance(value, type) and _library_type(value):
        out.append(f"type:{value.__module__}.{value.__qualname__};".encode())
    elif isinstance(value, tuple | list):
        _encode_sequence(value, out, depth)
    elif isinstance(value, dict):
        out.append(f"dict[{len(value)}](".encode())
        for key in sorted(value, key=repr):
            encode_argument(key, out, depth + 1)
            encode_argument(value[key], out, depth + 1)
        out.append(b")")
    else:
        function = _library_function(value)
        if function is not None:  # ``librosa.power_to_db(m, ref=np.max)``
            out.append(f"function:{function};".encode())
        else:
            _encode_object(value, out, depth)


def _encode_object(value: Any, out: list[bytes], depth: int) -> None:
    """A torch dtype or tensor, or a library's plain object (``ImageFilter.GaussianBlur(2)``)
    by its class and its attributes, all it computes with."""
    kind = type(value)
    dtype = _torch_dtype(value)
    if dtype is not None:
        out.append(dtype)
    elif _plain_library_object(value):
        out.append(f"object:{kind.__module__}.{kind.__qualname__}".encode())
        encode_argument(vars(value), out, depth + 1)
    else:
        raise Unkeyable(f"an argument of type {kind.__qualname__} has no stable value")


def _library_function(value: Any) -> str | None:
    """The name of a function of Python or of a library (a NumPy function or ufunc, a librosa
    function) under which its module holds it, None for anything else: named, it computes the
    same in every process and every run of those versions (a lambda, a user's function or a
    bound method may hold anything; OpenCV's functions name no module, so they are not keyed)."""
    if isinstance(value, type) or not callable(value):
        return None
    module = getattr(value, "__module__", None)
    name = getattr(value, "__qualname__", None) or getattr(value, "__name__", None)
    if not isinstance(module, str) or not isinstance(name, str) or "<" in name:
        return None
    if module != "builtins" and module.split(".", 1)[0] not in libraries.library_modules():
        return None
    from codedag.patching import loaded_value

    try:
        found = loaded_value(f"{module}.{name}")
    except LookupError:
        return None
    return f"{module}.{name}" if found is value else None


def _of_a_library(cls: type) -> bool:
    """Whether a class belongs to a library whose version is part of every key."""
    return cls.__module__.split(".", 1)[0] in libraries.library_modules()


def _library_type(value: type) -> bool:
    """Whether a class is Python's or a library's (NumPy's ``np.float32``, Pillow's
    ``ImageFilter.SMOOTH`` given to ``.filter``): named, it is the same class in every process
    and every run of those versions."""
    return value.__module__ == "builtins" or _of_a_library(value)


def _plain_library_object(value: Any) -> bool:
    """Whether ``value`` is an instance of a library's Python class, its state all in its
    ``__dict__`` (not a function, nor Python's own objects, nor a C object such as a CLAHE)."""
    if not _of_a_library(type(value)):
        return False
    return type(getattr(value, "__dict__", None)) is dict and not callable(value)


def _torch_dtype(value: Any) -> bytes | None:
    import sys

    torch = sys.modules.get("torch")
    if torch is not None:
        if isinstance(value, torch.dtype):
            return f"torch.dtype:{value};".encode()
        if isinstance(value, torch.Tensor):
            return b"tensor:" + _array_identity(_tensor(value))  # type: ignore[arg-type]
    return None


_OPENINGS: dict[tuple[str, str], tuple[bytes, bytes]] = {}
"""Each chain's and source call's opening of its source keys: ``(versions, chain + function +
versions)``."""


def source_key(chain: str, function: str, source: Any) -> bytes:
    """The key of a chain's source value: the chain, the source call's function (two calls that
    read one file make two values) and the source's identity."""
    current = versions()
    found = _OPENINGS.get((chain, function))
    if found is None or found[0] is not current:
        opening = b"\0".join((chain.encode(), function.encode(), current, b""))
        found = _OPENINGS[(chain, function)] = (current, opening)
    return xxhash.xxh3_128_digest(found[1] + source_identity(source))


def step_key(parts: list[bytes]) -> bytes:
    """The key of one call's result from its encoded name, inputs' keys and arguments."""
    return xxhash.xxh3_128_digest(b"".join(parts))

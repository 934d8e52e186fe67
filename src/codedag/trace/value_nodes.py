"""Which values become value nodes, how they are described and how arguments are summarized.

Data values are arrays and images: ``numpy.ndarray``, ``torch.Tensor``, ``PIL.Image.Image`` (their
subclasses too; each library package declares its data types) and any extra types the user names. Lists, tuples and dicts are looked into one
level deep, so a batch list of samples links each sample to the call that received the batch.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Sequence
from typing import Any

from codedag.backends import libraries
from codedag.backends.derived import SequenceView

SCALARS = (int, float, bool, str, bytes, type(None), complex)
MAX_CONTAINER_SCAN = 256
_SUMMARY_CHARS = 60

DATA_BASES: Sequence[tuple[str, str]] = SequenceView(libraries.data_types)
"""(module, attribute path) of the data base classes, declared by the library packages; resolved
once their module is imported."""


class DataTypes:
    """Decides, per type and with a cache, whether values of a type are data values."""

    def __init__(self, extra: tuple[type, ...] = ()) -> None:
        self._extra = tuple(extra)
        self._cache: dict[type, bool] = {}
        self._bases: tuple[type, ...] = ()
        self._resolved: set[str] = set()

    def _bases_now(self) -> tuple[type, ...]:
        changed = False
        for module_name, attr in DATA_BASES:
            if module_name in self._resolved:
                continue
            module = sys.modules.get(module_name)
            base = getattr(module, attr, None) if module is not None else None
            if isinstance(base, type):
                self._bases += (base,)
                self._resolved.add(module_name)
                changed = True
        if changed:
            stale = [t for t, v in self._cache.items() if not v]
            for t in stale:  # in place: the tracer's hot path holds this dict
                del self._cache[t]
        return self._bases + self._extra

    def is_data(self, cls: type) -> bool:
        """Whether values of ``cls`` become value nodes."""
        hit = self._cache.get(cls)
        if hit is None:
            hit = issubclass(cls, self._bases_now()) if not issubclass(cls, SCALARS) else False
            self._cache[cls] = hit
        return hit


_NAMES: dict[type, tuple[str, str]] = {}


def referenced_bytes(shape: Any, strides: Any, itemsize: int) -> int:
    """Bytes of memory an array view spans: ``itemsize + sum((n - 1) * |stride|)``.

    A strided view (``as_strided`` framing, broadcasting with stride 0) references far fewer
    bytes than ``prod(shape) * itemsize``; an empty array references none.
    """
    span = itemsize
    for n, step in zip(shape, strides):
        if n == 0:
            return 0
        span += (n - 1) * (step if step >= 0 else -step)
    return span


def describe(obj: Any) -> tuple[str, str, Any, Any, int, str, Any]:
    """``(name, type_name, shape, dtype, nbytes, device, strides)`` of a value (raw shape/dtype).

    ``nbytes`` counts the bytes a value references: a view whose strides overlap or skip
    (``as_strided`` framing, broadcast views) counts the span of memory it covers, never more than
    its apparent size. ``strides`` is in bytes for NumPy arrays, in elements for tensors, None
    for other values.
    """
    cls = type(obj)
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = (cls.__name__, f"{cls.__module__}.{cls.__qualname__}")
    name, type_name = names
    if type_name == "numpy.ndarray":  # the common case first
        nbytes = obj.nbytes
        strides = obj.strides
        if obj.base is not None and nbytes:
            nbytes = min(nbytes, referenced_bytes(obj.shape, strides, obj.itemsize))
        return name, type_name, obj.shape, obj.dtype, nbytes, "cpu", strides
    if cls.__module__ == "torch" or name in ("Tensor", "Parameter"):
        try:
            dims, steps = tuple(obj.shape), obj.stride()
            itemsize = obj.element_size()
            nbytes = itemsize * obj.nelement()
            if nbytes and obj._base is not None:
                nbytes = min(nbytes, referenced_bytes(dims, steps, 1) * itemsize)
            return name, type_name, dims, obj.dtype, nbytes, str(obj.device), steps
        except Exception:  # a Tensor-like that is not one: fall through
            pass
    shape = getattr(obj, "shape", None)
    if shape is not None and hasattr(obj, "nbytes"):
        dtype = getattr(obj, "dtype", None)
        steps = getattr(obj, "strides", None)
        nbytes = int(obj.nbytes)
        if getattr(obj, "base", None) is not None and isinstance(steps, tuple) and nbytes:
            itemsize = int(getattr(obj, "itemsize", 0) or 0)
            if itemsize:
                nbytes = min(nbytes, referenced_bytes(shape, steps, itemsize))
        return name, type_name, shape, dtype, nbytes, "cpu", steps
    size, mode = getattr(obj, "size", None), getattr(obj, "mode", None)
    if isinstance(size, tuple) and isinstance(mode, str):  # a PIL image
        bands = len(obj.getbands())
        shape = (size[1], size[0]) if bands == 1 else (size[1], size[0], bands)
        return name, type_name, shape, mode, size[0] * size[1] * bands, "cpu", None
    if isinstance(obj, list | tuple | dict):
        return name, type_name, (len(obj),), None, 0, "cpu", None
    return name, type_name, None, None, 0, "cpu", None


_SHAPES: dict[Any, list[int]] = {}


def format_shape(shape: Any) -> list[int] | None:
    """A JSON shape: a list of ints (a fresh list), or None."""
    if shape is None:
        return None
    try:
        hit = _SHAPES.get(shape)
    except TypeError:  # an unhashable shape-like
        hit = None
    if hit is not None:
        return list(hit)
    try:
        dims = [int(d) for d in shape]
    except (TypeError, ValueError):
        return None
    if len(_SHAPES) < 65536:
        with contextlib.suppress(TypeError):
            _SHAPES[shape] = dims
    return list(dims)


_DTYPE_TEXT: dict[Any, str] = {}


def format_dtype(dtype: object) -> str | None:
    """A short dtype string (``uint8``, ``float32``); cached: NumPy's ``str(dtype)`` is slow."""
    if dtype is None:
        return None
    try:
        return _DTYPE_TEXT[dtype]
    except (KeyError, TypeError):
        pass
    text = str(dtype)
    text = text[6:] if text.startswith("torch.") else text
    with contextlib.suppress(TypeError):  # unhashable
        _DTYPE_TEXT[dtype] = text
    return text


def short_repr(obj: object) -> str:
    """A repr cut to a readable length."""
    try:
        text = repr(obj)
    except Exception:
        text = f"<{type(obj).__name__}>"
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 3] + "..."


def value_summary(name: str, shape: object, dtype: object) -> str:
    """``ndarray[512,512,3] uint8``-style summary of a data value."""
    dims = format_shape(shape)
    text = name if dims is None else f"{name}[{','.join(map(str, dims))}]"
    dt = format_dtype(dtype)
    return f"{text} {dt}" if dt else text

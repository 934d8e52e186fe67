"""Which values become value nodes, how they are described and how arguments are summarized.

Data values are arrays and images: ``numpy.ndarray``, ``torch.Tensor``, ``PIL.Image.Image`` (their
subclasses too) and any extra types the user names. Lists, tuples and dicts are looked into one
level deep, so a batch list of samples links each sample to the call that received the batch.
"""

from __future__ import annotations

import sys
from typing import Any

SCALARS = (int, float, bool, str, bytes, type(None), complex)
MAX_CONTAINER_SCAN = 256
_SUMMARY_CHARS = 60

# (module, attribute path) of the data base classes; resolved once their module is imported.
DATA_BASES: tuple[tuple[str, str], ...] = (
    ("numpy", "ndarray"),
    ("torch", "Tensor"),
    ("PIL.Image", "Image"),
)


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


def describe(obj: Any) -> tuple[str, str, Any, Any, int, str]:
    """``(name, type_name, shape, dtype, nbytes, device)`` of a value; shape/dtype kept raw."""
    cls = type(obj)
    names = _NAMES.get(cls)
    if names is None:
        names = _NAMES[cls] = (cls.__name__, f"{cls.__module__}.{cls.__qualname__}")
    name, type_name = names
    if type_name == "numpy.ndarray":  # the common case first
        return name, type_name, obj.shape, obj.dtype, obj.nbytes, "cpu"
    if cls.__module__ == "torch" or name in ("Tensor", "Parameter"):
        try:
            return (
                name,
                type_name,
                tuple(obj.shape),
                obj.dtype,
                obj.element_size() * obj.nelement(),
                str(obj.device),
            )
        except Exception:  # a Tensor-like that is not one: fall through
            pass
    shape = getattr(obj, "shape", None)
    if shape is not None and hasattr(obj, "nbytes"):
        return name, type_name, shape, getattr(obj, "dtype", None), int(obj.nbytes), "cpu"
    size, mode = getattr(obj, "size", None), getattr(obj, "mode", None)
    if isinstance(size, tuple) and isinstance(mode, str):  # a PIL image
        bands = len(obj.getbands())
        shape = (size[1], size[0]) if bands == 1 else (size[1], size[0], bands)
        return name, type_name, shape, mode, size[0] * size[1] * bands, "cpu"
    if isinstance(obj, list | tuple | dict):
        return name, type_name, (len(obj),), None, 0, "cpu"
    return name, type_name, None, None, 0, "cpu"


def format_shape(shape: Any) -> list[int] | None:
    """A JSON shape: a list of ints, or None."""
    if shape is None:
        return None
    try:
        return [int(d) for d in shape]
    except (TypeError, ValueError):
        return None


def format_dtype(dtype: Any) -> str | None:
    """A short dtype string (``uint8``, ``float32``)."""
    if dtype is None:
        return None
    text = str(dtype)
    return text[6:] if text.startswith("torch.") else text


def short_repr(obj: Any) -> str:
    """A repr cut to a readable length."""
    try:
        text = repr(obj)
    except Exception:
        text = f"<{type(obj).__name__}>"
    return text if len(text) <= _SUMMARY_CHARS else text[: _SUMMARY_CHARS - 3] + "..."


def value_summary(name: str, shape: Any, dtype: Any) -> str:
    """``ndarray[512,512,3] uint8``-style summary of a data value."""
    dims = format_shape(shape)
    text = name if dims is None else f"{name}[{','.join(map(str, dims))}]"
    dt = format_dtype(dtype)
    return f"{text} {dt}" if dt else text

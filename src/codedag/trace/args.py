"""Argument descriptions of library calls (``CallNode.args``).

While tracing, the recorder keeps what a library call received in a compact raw form (value
sequence numbers, the bytes of small arrays, scalars, small containers' items); after the window
:func:`describe_arguments` turns that into the JSON entries of ``CallNode.args`` (format in
docs/dag-format.md). :mod:`codedag.trace.rebuild` turns entries back into arguments.
"""

from __future__ import annotations

import base64
import enum
import functools
import inspect
import math
import sys
from collections.abc import Mapping
from typing import Any

from codedag.trace.records import ARG_CONTAINER, ARG_OBJ, ARG_SCALAR, ARG_SMALL, ARG_TYPE, ARG_VALUE
from codedag.trace.value_nodes import format_dtype

Entry = dict[str, Any]

# ---------------------------------------------------------------------------- recording side
# Arrays up to this size carry their bytes in a library call's argument description (ARG_SMALL).
SMALL_ARRAY_BYTES = 4096

_kept: dict[type, bool] = {}


def kept_object(obj: Any) -> bool:
    """Whether a non-scalar, non-data argument is immutable and descriptive enough to keep.

    NumPy scalars, dtypes and scalar types, torch dtypes, slices, Ellipsis and enum members are
    kept as they are (holding them is safe: they never change); anything else is described by
    its type only.
    """
    cls = type(obj)
    hit = _kept.get(cls)
    if hit is None:
        hit = cls in (slice, type(Ellipsis), range) or issubclass(cls, enum.Enum)
        numpy = sys.modules.get("numpy")
        if not hit and numpy is not None:
            hit = issubclass(cls, numpy.generic | numpy.dtype)
        torch = sys.modules.get("torch")
        if not hit and torch is not None:
            hit = cls is torch.dtype
        _kept[cls] = hit
    if hit:
        return True
    if cls is type:
        return _is_scalar_type(obj)
    return callable(obj) and library_function_name(obj) is not None


def library_function_name(obj: Any) -> str | None:
    """``module.qualname`` of a function of a library codedag knows, passed as an argument
    (``librosa.power_to_db(S, ref=np.max)``), when that name finds the same function again
    (:func:`library_function`); None for anything else (a lambda, a bound method, a class)."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if isinstance(obj, type) or not isinstance(module, str) or not isinstance(qualname, str):
        return None
    name = f"{module}.{qualname}"
    return name if library_function(name) is obj else None


def library_function(name: str) -> Any:
    """The function a library codedag knows has under ``name`` (``numpy.max``), else None.

    Only attributes of a library's modules this process has imported are looked up: a name read
    from a file imports nothing and reaches nothing but a library's own functions.
    """
    from codedag.backends.libraries import library_packages

    parts = name.split(".") if isinstance(name, str) and len(name) <= 200 else []
    if len(parts) < 2 or parts[0] not in library_packages() or not all(parts):
        return None
    for end in range(len(parts) - 1, 0, -1):
        found: Any = sys.modules.get(".".join(parts[:end]))
        if found is not None:
            break
    else:
        return None
    for attribute in parts[end:]:
        if not attribute.isidentifier():
            return None
        found = inspect.getattr_static(found, attribute, None)
    if isinstance(found, staticmethod):
        found = found.__func__
    return found if callable(found) and not isinstance(found, type) else None


def _is_scalar_type(obj: type) -> bool:
    numpy = sys.modules.get("numpy")
    if obj in (int, float, bool, complex):
        return True
    return numpy is not None and issubclass(obj, numpy.generic)


_EXPOSES_MEMORY: dict[type, bool] = {}


def _exposes_memory(cls: type) -> bool:
    """Whether instances of ``cls`` are arrays over memory they hold: NumPy's types, and types
    whose ``__array_interface__`` is data rather than a property that computes it (a PIL
    image's decodes its file and copies every pixel: asking an argument for it would do the
    decode inside the tracer, where its time is the tracer's own and is subtracted from the
    call that would have decoded)."""
    found = _EXPOSES_MEMORY.get(cls)
    if found is None:
        attribute = inspect.getattr_static(cls, "__array_interface__", None)
        found = cls.__module__ == "numpy" or (
            attribute is not None and not isinstance(attribute, property)
        )
        _EXPOSES_MEMORY[cls] = found
    return found


def small_bytes(obj: Any) -> bytes | None:
    """The C-order bytes of a CPU array of at most SMALL_ARRAY_BYTES bytes, else None."""
    try:
        if _exposes_memory(type(obj)):
            nbytes = obj.nbytes
            return obj.tobytes() if nbytes <= SMALL_ARRAY_BYTES else None
        if hasattr(obj, "element_size") and hasattr(obj, "nelement"):  # a torch tensor
            if obj.element_size() * obj.nelement() > SMALL_ARRAY_BYTES:
                return None
            if obj.device.type != "cpu":
                return None
            return bytes(obj.detach().contiguous().numpy().tobytes())
    except Exception:  # an exotic array type: described without its data
        return None
    return None


# ---------------------------------------------------------------------------- description
_LAYOUTS: dict[tuple[Any, Any, int], str] = {}


def layout_of(shape: Any, strides: Any, itemsize: int) -> str:
    """``"C"`` (row-major contiguous), ``"F"`` (column-major contiguous) or ``"strided"``."""
    if strides is None:
        return "C"
    key = (tuple(shape), tuple(strides), itemsize)
    hit = _LAYOUTS.get(key)
    if hit is None:
        hit = _layout(shape, strides, itemsize)
        if len(_LAYOUTS) < 65536:
            _LAYOUTS[key] = hit
    return hit


def _layout(shape: Any, strides: Any, itemsize: int) -> str:
    dims = list(zip(shape, strides))
    for order, items in (("C", reversed(dims)), ("F", iter(dims))):
        expected = itemsize
        ok = True
        for n, step in items:
            if n != 1 and step != expected:
                ok = False
                break
            expected *= n
        if ok:
            return order
    return "strided"


_PLAIN_TYPES = (bool, int, str, type(None))


def _scalar_entry(value: Any) -> Entry:
    cls = type(value)
    if cls in _PLAIN_TYPES or (cls is float and math.isfinite(value)):
        return {"kind": "scalar", "value": value}
    if isinstance(value, bool | int | str):
        return {"kind": "scalar", "value": value}
    if isinstance(value, float):
        if math.isfinite(value):
            return {"kind": "scalar", "value": value}
        return {"kind": "scalar", "float": "nan" if math.isnan(value) else str(value)}
    return {"kind": "object", "type": _type_name(type(value))}


def _type_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _object_entry(obj: Any) -> Entry:
    cls = type(obj)
    numpy = sys.modules.get("numpy")
    if numpy is not None:
        if isinstance(obj, numpy.generic):
            entry = _scalar_entry(obj.item())
            if entry["kind"] == "scalar":
                entry["dtype"] = str(obj.dtype)
            return entry
        if isinstance(obj, numpy.dtype):
            return {"kind": "dtype", "value": str(obj)}
        if isinstance(obj, type) and issubclass(obj, numpy.generic):
            try:
                return {"kind": "dtype", "value": str(numpy.dtype(obj))}
            except TypeError:  # an abstract type (numpy.floating)
                return {"kind": "object", "type": _type_name(obj)}
    if cls.__module__ == "torch" and cls.__name__ == "dtype":
        return {"kind": "dtype", "value": str(obj)}
    if obj in (int, float, bool, complex):
        return {"kind": "dtype", "value": obj.__name__}
    if isinstance(obj, enum.Enum):
        entry = _scalar_entry(obj.value)
        if entry["kind"] == "scalar":
            entry["enum"] = _type_name(cls)
        return entry
    if cls is slice:
        parts = [_plain(obj.start), _plain(obj.stop), _plain(obj.step)]
        if all(p is None or isinstance(p, int) for p in parts):
            return {"kind": "slice", "start": parts[0], "stop": parts[1], "step": parts[2]}
    if obj is Ellipsis:
        return {"kind": "ellipsis"}
    function = library_function_name(obj) if callable(obj) else None
    if function is not None:
        return {"kind": "function", "value": function}
    return {"kind": "object", "type": _type_name(cls)}


def _plain(value: Any) -> Any:
    try:
        return int(value) if value is not None and not isinstance(value, bool) else value
    except (TypeError, ValueError):
        return value


def _value_entry(record: list[Any] | None, data: bytes | None) -> Entry:
    """An entry for a data value from its value record ``[seq, name, version, type_name,
    shape, dtype, nbytes, device, strides]``."""
    if record is None:
        return {"kind": "object", "type": "unknown"}
    type_name, shape, dtype, strides = record[3], record[4], record[5], record[8]
    if isinstance(dtype, str) and shape is not None and strides is None:  # a PIL image
        size = [int(shape[1]), int(shape[0])]
        return {"kind": "image", "type": type_name, "mode": dtype, "size": size}
    numpy = sys.modules.get("numpy")
    if numpy is not None and isinstance(dtype, numpy.dtype) and shape is not None:
        family, itemsize = "numpy.ndarray", dtype.itemsize
    elif type(dtype).__module__ == "torch" and shape is not None:
        family, itemsize = "torch.Tensor", 1  # torch strides count elements
    else:
        return {"kind": "object", "type": type_name}
    dims = [int(d) for d in shape]
    entry: Entry = {
        "kind": "array",
        "type": family,
        "shape": dims,
        "dtype": format_dtype(dtype),
        "layout": layout_of(dims, strides, itemsize),
    }
    if family == "torch.Tensor":
        entry["device"] = record[7]
    if data is not None:
        entry["data"] = base64.b64encode(data).decode("ascii")
    return entry


def _entry(kind: int, payload: Any, values: Mapping[int, list[Any]]) -> Entry:
    if kind == ARG_SCALAR:
        return _scalar_entry(payload)
    if kind == ARG_VALUE:
        return _value_entry(values.get(payload), None)
    if kind == ARG_SMALL:
        return _value_entry(values.get(payload[0]), payload[1])
    if kind == ARG_OBJ:
        return _object_entry(payload)
    if kind == ARG_CONTAINER:
        type_name, _length, items = payload
        if items is None or type_name not in ("tuple", "list"):
            return {"kind": "object", "type": f"builtins.{type_name}"}
        return {
            "kind": "sequence",
            "type": type_name,
            "items": [_entry(k, p, values) for k, p in items],
        }
    if kind == ARG_TYPE:
        return {"kind": "object", "type": _type_name(payload)}
    return {"kind": "object", "type": "unknown"}


def _named(name: str, entry: Entry) -> Entry:
    return {"name": name, **entry}


@functools.lru_cache(maxsize=1024)
def parameter_defaults(name: str) -> dict[str, Any]:
    """Default values of the parameters of the Python function named ``name`` ({} if unknown)."""
    parts = name.split(".")
    for split in range(len(parts) - 1, 0, -1):
        obj: Any = sys.modules.get(".".join(parts[:split]))
        if obj is None:
            continue
        for part in parts[split:]:
            obj = getattr(obj, part, None)
            if obj is None:
                return {}
        obj = getattr(obj, "__wrapped__", obj)
        try:
            parameters = inspect.signature(obj).parameters.values()
        except (TypeError, ValueError):
            return {}
        return {p.name: p.default for p in parameters if p.default is not p.empty}
    return {}


def _is_default_sentinel(label: Any, kind: int, payload: Any, defaults: Mapping[str, Any]) -> bool:
    """A parameter left at a default that is a sentinel object (NumPy's ``_NoValue``)."""
    if kind != ARG_TYPE or label not in defaults:
        return False
    return type(defaults[label]) is payload


def describe_arguments(
    raw: list[tuple[Any, int, Any]],
    values: Mapping[int, list[Any]],
    layout: tuple[int, int, int, bool, bool] | None = None,
    defaults: Mapping[str, Any] | None = None,
) -> list[Entry]:
    """JSON entries of one call's recorded arguments, in call order.

    Args:
        raw: the recorder's ``(label, kind, payload)`` triples: int labels are positions,
            str labels keyword or parameter names.
        values: value records by sequence number.
        layout: for Python functions, ``(positional-only, positional, keyword-only, *args,
            **kwargs)`` counts of the frame's parameters (``raw`` then lists the parameters in
            that order): positional-only parameters, and every positional parameter when
            ``*args`` is not empty, are named by position; ``*args`` items follow them and
            ``**kwargs`` items are named by their keys.
        defaults: the function's parameter defaults; keyword parameters left at a default
            that is a sentinel object (recorded by type only) are left out.
    """
    if layout is None:
        return [_named(str(label), _entry(kind, payload, values)) for label, kind, payload in raw]
    posonly, npos, nkw, varargs, varkw = layout
    out: list[Entry] = []
    extra_positional: list[Entry] = []
    extra_keywords: list[Entry] = []
    star = raw[npos + nkw] if varargs and len(raw) > npos + nkw else None
    star_items = None
    if star is not None and star[1] == ARG_CONTAINER:
        star_items = star[2][2]
        if star_items is None and star[2][1] > 0:
            extra_positional.append(_named(str(npos), {"kind": "object", "type": "builtins.tuple"}))
    by_position = posonly if not star_items and not extra_positional else npos
    for i, (label, kind, payload) in enumerate(raw[: npos + nkw]):
        if i >= by_position and defaults and _is_default_sentinel(label, kind, payload, defaults):
            continue
        name = str(i) if i < by_position else str(label)
        out.append(_named(name, _entry(kind, payload, values)))
    for j, (kind, payload) in enumerate(star_items or ()):
        extra_positional.append(_named(str(npos + j), _entry(kind, payload, values)))
    if varkw:
        kw = raw[npos + nkw + varargs] if len(raw) > npos + nkw + varargs else None
        if kw is not None and kw[1] == ARG_CONTAINER and kw[2][2] is not None:
            for key, kind, payload in kw[2][2]:
                extra_keywords.append(_named(str(key), _entry(kind, payload, values)))
        elif kw is not None and not (kw[1] == ARG_CONTAINER and kw[2][1] == 0):
            extra_keywords.append(_named(str(kw[0]), {"kind": "object", "type": "builtins.dict"}))
    positional = [e for e in out if e["name"].isdigit()]
    named = [e for e in out if not e["name"].isdigit()]
    return positional + extra_positional + named + extra_keywords

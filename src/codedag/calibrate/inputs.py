"""Inputs for timing a traced call: rebuilt from the tracer's argument descriptions.

The tracer records each library call's arguments as JSON (``CallNode.args``, format in
docs/dag-format.md): arrays by shape, dtype and layout (small ones with their bytes), scalars and
short sequences by value. :func:`rebuild_call` turns a description back into ``(args, kwargs)``
of the same shapes, dtypes, layouts and parameters; large arrays get random contents in the
dtype's usual range (the time of the libraries this targets does not depend on pixel values).
:func:`signature` is the cache key of a description: what the time depends on (shapes, dtypes,
layouts, integer/flag/string parameters), not array contents or float parameters.
"""

from __future__ import annotations

import base64
import hashlib
import json
from typing import Any

import numpy as np

from codedag.errors import CodeDAGError


class CannotRebuild(CodeDAGError):
    """The recorded description is not enough to rebuild the call (an opaque object argument)."""


_NONFINITE = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _array(entry: dict[str, Any], rng: np.random.Generator) -> Any:
    shape = tuple(int(d) for d in entry.get("shape") or ())
    dtype = np.dtype(entry.get("dtype") or "float32")
    data = entry.get("data")
    if isinstance(data, str):
        array = np.frombuffer(base64.b64decode(data), dtype=dtype).reshape(shape).copy()
    elif dtype == np.bool_:
        array = rng.integers(0, 2, size=shape).astype(np.bool_)
    elif dtype.kind == "u":
        high = min(int(np.iinfo(dtype).max), 255)
        array = rng.integers(0, high + 1, size=shape, dtype=dtype)
    elif dtype.kind == "i":
        array = rng.integers(-128, 128, size=shape).astype(dtype)
    elif dtype.kind == "c":
        array = (rng.random(shape) + 1j * rng.random(shape)).astype(dtype)
    else:
        array = rng.random(shape, dtype=np.float64).astype(dtype)
    layout = entry.get("layout", "C")
    if layout == "F":
        array = np.asfortranarray(array)
    if entry.get("type") == "torch.Tensor":
        import torch

        return torch.from_numpy(np.ascontiguousarray(array))
    return array


def _image(entry: dict[str, Any], rng: np.random.Generator) -> Any:
    from PIL import Image

    mode = str(entry.get("mode", "RGB"))
    width, height = (int(v) for v in entry.get("size", (1, 1)))
    bands = len(Image.new(mode, (1, 1)).getbands())
    shape = (height, width) if bands == 1 else (height, width, bands)
    if mode in ("I", "F", "I;16", "1"):
        return Image.new(mode, (width, height))
    pixels = rng.integers(0, 256, size=shape, dtype=np.uint8)
    return Image.fromarray(pixels).convert(mode)


def rebuild_value(entry: dict[str, Any], rng: np.random.Generator) -> Any:
    """One argument value from its description.

    Raises:
        CannotRebuild: an ``object`` argument (its type was recorded, not its state).
    """
    kind = entry.get("kind")
    if kind == "scalar":
        if "float" in entry:
            return _NONFINITE[str(entry["float"])]
        return entry.get("value")
    if kind == "array":
        return _array(entry, rng)
    if kind == "sequence":
        items = [rebuild_value(item, rng) for item in entry.get("items", [])]
        return tuple(items) if entry.get("type") == "tuple" else items
    if kind == "image":
        return _image(entry, rng)
    raise CannotRebuild(
        f"argument {entry.get('name', '?')!r} is a {entry.get('type', 'value')} whose state was "
        "not recorded"
    )


def rebuild_call(
    args: list[dict[str, Any]], seed: int = 0
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` rebuilt from a call's argument descriptions (deterministic per seed).

    Raises:
        CannotRebuild: an argument cannot be rebuilt.
    """
    rng = np.random.default_rng(seed)
    positional: list[tuple[int, Any]] = []
    keywords: dict[str, Any] = {}
    for entry in args:
        name = str(entry.get("name", ""))
        value = rebuild_value(entry, rng)
        if name.isdigit():
            positional.append((int(name), value))
        else:
            keywords[name] = value
    positional.sort(key=lambda item: item[0])
    return tuple(v for _i, v in positional), keywords


def _shape_of(entry: dict[str, Any]) -> Any:
    kind = entry.get("kind")
    if kind == "array":
        return ["a", entry.get("type"), entry.get("shape"), entry.get("dtype"), entry.get("layout")]
    if kind == "image":
        return ["i", entry.get("mode"), entry.get("size")]
    if kind == "sequence":
        return ["s", entry.get("type"), [_shape_of(i) for i in entry.get("items", [])]]
    if kind == "scalar":
        value = entry.get("value")
        if "float" in entry or isinstance(value, float):
            return ["f"]  # float parameters (sigmas, factors) do not change the time
        return ["v", value]
    return ["o", entry.get("type")]


def signature(args: list[dict[str, Any]]) -> str:
    """A short stable key of what a call's time depends on (see the module docstring)."""
    parts = [[str(e.get("name", "")), _shape_of(e)] for e in args]
    text = json.dumps(parts, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha1(text.encode("utf-8")).hexdigest()[:16]


def describe(args: list[dict[str, Any]], limit: int = 60) -> str:
    """A readable summary of the arguments: ``uint8[480,640,3], (320, 320), flags=1``."""
    parts = []
    for entry in args:
        text = _text(entry)
        name = str(entry.get("name", ""))
        parts.append(text if name.isdigit() else f"{name}={text}")
    out = ", ".join(parts)
    return out if len(out) <= limit else out[: limit - 3] + "..."


def _text(entry: dict[str, Any]) -> str:
    kind = entry.get("kind")
    if kind == "array":
        shape = ",".join(str(d) for d in entry.get("shape") or ())
        return f"{entry.get('dtype')}[{shape}]"
    if kind == "image":
        return f"PIL {entry.get('mode')} {entry.get('size')}"
    if kind == "sequence":
        inner = ", ".join(_text(i) for i in entry.get("items", []))
        return f"({inner})" if entry.get("type") == "tuple" else f"[{inner}]"
    if kind == "scalar":
        return str(entry.get("float", entry.get("value")))
    return str(entry.get("type", "?")).rsplit(".", 1)[-1]


def input_bytes(args: list[dict[str, Any]]) -> int:
    """Bytes of the array arguments (what a host-to-device copy moves)."""
    total = 0
    for entry in args:
        if entry.get("kind") == "array":
            count = 1
            for d in entry.get("shape") or ():
                count *= int(d)
            total += count * np.dtype(entry.get("dtype") or "float32").itemsize
        elif entry.get("kind") == "sequence":
            total += input_bytes(list(entry.get("items", [])))
    return total

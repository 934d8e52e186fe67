"""Inputs for timing a traced call: rebuilt from the tracer's argument descriptions.

The tracer records each library call's arguments as JSON (``CallNode.args``, format in
docs/dag-format.md): arrays by shape, dtype and layout (small ones with their bytes), scalars and
short sequences by value. :func:`rebuild_call` turns a description back into ``(args, kwargs)``
of the same shapes, dtypes, layouts and parameters (``codedag.trace.args``); large arrays get
synthetic contents in the dtype's usual range (the time of the libraries this targets does not
depend on pixel values).
:func:`signature` is the cache key of a description: what the time depends on (shapes, dtypes,
layouts, integer/flag/string parameters), not array contents or float parameters.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import numpy as np


def rebuild_call(
    args: list[dict[str, Any]], seed: int = 0
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``(args, kwargs)`` rebuilt from a call's argument descriptions (deterministic per seed).

    Raises:
        TraceError: an argument cannot be rebuilt (an object recorded by its type only).
    """
    from codedag.trace.rebuild import rebuild_arguments

    return rebuild_arguments(args, seed)


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

"""The file sources the library packages declare, found by the canonical names traces carry.

A library's ``facts.py`` declares its functions that read a file under a public name
(``librosa.load``); a trace names the function by its canonical name
(``librosa.core.audio.load``). :func:`file_source` answers for either: the first lookup of a
library resolves each of its declared names to the function object (importing the library where
it is installed) and files the declaration under the object's canonical name too. A library that
is not installed answers under its declared names only.
"""

from __future__ import annotations

import functools
import inspect
import threading
from collections.abc import Callable
from typing import Any

from codedag.backends import libraries
from codedag.backends.facts import FileSource

_resolved: dict[str, dict[str, FileSource]] = {}
"""The declared sources of each top-level module, by every name found for them."""
_lock = threading.Lock()


def file_source(name: str) -> FileSource | None:
    """The file source declared for the function named ``name`` (public or canonical), or
    ``None`` when no library declares it one."""
    top = name.split(".", 1)[0]
    table = _resolved.get(top)
    if table is None:
        table = _resolve(top)
    return table.get(name)


def argument_value(
    function: Callable[..., Any], name: str, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """The value parameter ``name`` of ``function`` takes in a call with ``args`` and
    ``kwargs``: given by keyword or position, else its default (``None`` where it has none)."""
    if name in kwargs:
        return kwargs[name]
    position, default = _parameter(function, name)
    if position is not None and position < len(args):
        return args[position]
    return default


@functools.cache
def _parameter(function: Callable[..., Any], name: str) -> tuple[int | None, Any]:
    """Parameter ``name``'s position (``None``: keyword-only, or not found) and default."""
    try:
        parameters = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):  # a builtin without a signature
        return None, None
    for position, parameter in enumerate(parameters):
        if parameter.name != name:
            continue
        default = None if parameter.default is inspect.Parameter.empty else parameter.default
        positional = parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        )
        return (position if positional else None), default
    return None, None


def _resolve(top: str) -> dict[str, FileSource]:
    from codedag.backends.names import canonical_name
    from codedag.patching import resolve

    declared = {n: s for n, s in libraries.file_sources().items() if n.split(".", 1)[0] == top}
    table = dict(declared)
    for name, source in declared.items():
        try:
            function = resolve(name)[2]
        except Exception:  # not installed, or absent in this version
            continue
        table.setdefault(canonical_name(function), source)
    with _lock:
        _resolved[top] = table
    return table


def forget() -> None:
    """Resolve every library's sources anew at the next lookup (a library installed since)."""
    with _lock:
        _resolved.clear()


libraries.on_refresh(forget)

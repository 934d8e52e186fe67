"""Which fields of a plan name library functions, and every name a plan would use.

A plan file may come from elsewhere. The fields whose strings the runtime patches or imports are
typed :data:`FunctionName` (a canonical name the runtime may move to a device, ``cv2.resize``),
:data:`ContextKey` (a traced context key, whose last segment is such a name) or
:data:`LibraryFunction` (a library function patched where it runs and never moved: the prefix
cache's and the lookup tables' functions, ``cv2.imread``); :func:`named_functions` walks any plan
model by those types, so a section added later is covered by declaring its fields with them.
Whether the names are *used* follows each model's
:meth:`in_use <codedag.plan.model.PlannedCall.in_use>` (a call kept on the CPU, a chain not run
batched, a chain not cached: named, never patched).

Checking the names against the registry happens above this layer
(:mod:`codedag.backends.admission`), before anything is imported.
"""

from __future__ import annotations

import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel

from codedag.plan.context import function_of


@dataclass(frozen=True)
class NameRole:
    """Marks a plan field whose strings name functions the runtime may move (``function``),
    context keys of such functions (``key``) or library functions patched where they run
    (``library``)."""

    kind: Literal["function", "key", "library"]


FunctionName = Annotated[str, NameRole("function")]
"""A canonical function name the runtime may patch (``cv2.resize``)."""
ContextKey = Annotated[str, NameRole("key")]
"""A traced context key (``a.f#0/cv2.resize#1``); its function is its last segment."""
LibraryFunction = Annotated[str, NameRole("library")]
"""A library function patched where it runs, never moved (a cached chain's ``cv2.imread``)."""


@dataclass(frozen=True)
class NamedFunction:
    """One function a plan names.

    Attributes:
        where: the field path (``batched.chains.0.functions``).
        name: the function (for a context key, its last segment).
        used: whether applying the plan patches it (its section is in use).
        kind: ``function`` (the runtime may move it to a device) or ``library`` (patched where
            it runs).
    """

    where: str
    name: str
    used: bool
    kind: Literal["function", "library"] = "function"


def _role(annotation: Any) -> tuple[NameRole | None, str]:
    """The role marking ``annotation`` and where it sits: ``value``, ``item`` or ``key``."""
    if typing.get_origin(annotation) is Annotated:
        for meta in annotation.__metadata__:
            if isinstance(meta, NameRole):
                return meta, "value"
        return None, ""
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin in (list, tuple, set, frozenset) and args:
        role, _ = _role(args[0])
        return role, "item"
    if origin is dict and args:
        role, _ = _role(args[0])
        return role, "key"
    return None, ""


def field_role(model: type[BaseModel], field: str) -> tuple[NameRole | None, str]:
    """The role declared on ``model.field`` and where its strings sit (``value``, ``item``,
    ``key``), or ``(None, "")``: what :func:`named_functions` reads."""
    info = model.model_fields[field]
    for meta in info.metadata:
        if isinstance(meta, NameRole):
            return meta, "value"
    return _role(info.annotation)


def _strings(value: object, place: str) -> list[tuple[str, str]]:
    if place == "value":
        return [("", value)] if isinstance(value, str) else []
    if place == "key" and isinstance(value, dict):
        return [("", k) for k in value if isinstance(k, str)]
    if place == "item" and isinstance(value, list | tuple | set | frozenset):
        return [(f".{i}", v) for i, v in enumerate(value) if isinstance(v, str)]
    return []


def named_functions(
    model: BaseModel, where: str = "", used: bool = True
) -> Iterator[NamedFunction]:
    """Every function name in ``model`` and its sub-models, by the fields' declared roles.

    Args:
        model: a plan or any of its sections.
        where: the path of ``model`` in the plan (prefix of each ``where``).
        used: whether the enclosing section is in use.
    """
    used = used and bool(getattr(model, "in_use", True))
    prefix = f"{where}." if where else ""
    for field in type(model).model_fields:
        value = getattr(model, field)
        role, place = field_role(type(model), field)
        if role is not None:
            kind: Literal["function", "library"] = (
                "library" if role.kind == "library" else "function"
            )
            for suffix, text in _strings(value, place):
                if role.kind == "key":
                    if not text.strip("/"):
                        continue
                    text = function_of(text)
                yield NamedFunction(f"{prefix}{field}{suffix}", text, used, kind)
            continue
        yield from _children(value, f"{prefix}{field}", used)


def _children(value: object, where: str, used: bool) -> Iterator[NamedFunction]:
    if isinstance(value, BaseModel):
        yield from named_functions(value, where, used)
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            if isinstance(item, BaseModel):
                yield from named_functions(item, f"{where}.{index}", used)
    elif isinstance(value, dict):
        for key, item in value.items():
            if isinstance(item, BaseModel):
                yield from named_functions(item, f"{where}.{key}", used)

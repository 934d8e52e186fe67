"""The code a plan is made for: which classes make a loader's samples, and digests of the code.

A stored plan (:mod:`.plan_store`) is keyed by :func:`pipeline_source` of the classes
:func:`pipeline_classes` finds (a data set's own, or those torch's wrappers wrap), and its record
keeps :func:`code_digests` of the other modules the traced samples ran; :func:`changed_code` says
which of them differ in this process. A module or class without a source file (a notebook's
``__main__``) is read by its bytecode (:func:`code_fingerprint`).
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import sys
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

MAX_CODE_MODULES = 64
"""Modules of the pipeline's own code a record keeps a digest of, at most."""


def pipeline_source(kind: type) -> str:
    """The dataset class's name, its source, its bytecode (where no source can be read: a class
    of a notebook cell) and its module file's content."""
    parts = [f"{kind.__module__}.{kind.__qualname__}", code_fingerprint([kind])]
    with contextlib.suppress(OSError, TypeError):
        parts.append(inspect.getsource(kind))
    module = sys.modules.get(kind.__module__)
    path = getattr(module, "__file__", None)
    if path:
        with contextlib.suppress(OSError):
            parts.append(Path(path).read_text(encoding="utf-8", errors="replace"))
    return "\n".join(parts)


_TORCH_DATA = "torch.utils.data."
MAX_WRAPPED = 16
"""Data sets under torch's wrappers a key reads, at most."""


def pipeline_datasets(dataset: object) -> list[object]:
    """The data sets whose code makes ``dataset``'s samples: itself, or where it is one of
    torch's wrappers (``Subset`` from ``random_split``, ``ConcatDataset``, ``StackDataset``,
    ...) the data sets it wraps, in order: torch's own code is the same in every script."""
    found: list[object] = []
    pending = [dataset]
    while pending and len(found) < MAX_WRAPPED:
        item = pending.pop(0)
        if not type(item).__module__.startswith(_TORCH_DATA):
            found.append(item)
            continue
        inner = getattr(item, "datasets", None)
        if isinstance(inner, dict):
            inner = list(inner.values())
        if not isinstance(inner, list | tuple):
            inner = [getattr(item, "dataset", None)] if hasattr(item, "dataset") else []
        if not inner:
            found.append(item)  # a torch data set of its own (TensorDataset): its code is torch's
        pending[:0] = inner[:MAX_WRAPPED]  # depth first: the wrapped data sets in their order
    return found or [dataset]


def pipeline_classes(dataset: object) -> list[type]:
    """The classes of :func:`pipeline_datasets`, each once, in order."""
    return list(dict.fromkeys(type(item) for item in pipeline_datasets(dataset)))


_SETTING_TYPES = (bool, int, float, str, type(None))
MAX_SETTING_CHARS = 256
"""A text attribute longer than this is data (a caption), not a setting."""


def pipeline_settings(dataset: object) -> list[dict[str, Any]]:
    """The settings of each of :func:`pipeline_datasets`: its attributes that hold a number, a
    flag, a short text or ``None`` (``train=False``, ``size=224``), which choose the path its
    samples take through the same code."""
    out = []
    for item in pipeline_datasets(dataset):
        attributes = getattr(item, "__dict__", None) or {}
        out.append(
            {
                name: value
                for name, value in sorted(attributes.items())
                if isinstance(value, _SETTING_TYPES)
                and not (isinstance(value, str) and len(value) > MAX_SETTING_CHARS)
                and not (isinstance(value, float) and value != value)  # NaN: never equal
            }
        )
    return out


def pipeline_name(dataset: object) -> str:
    """What a summary calls ``dataset``: its class, or the classes torch's wrappers wrap
    (``LeafDataset in Subset``)."""
    classes = pipeline_classes(dataset)
    names = ", ".join(c.__qualname__ for c in classes)
    outer = type(dataset)
    return names if classes == [outer] else f"{names} in {outer.__qualname__}"


def _module_of(name: str) -> str | None:
    """The loaded module a qualified function name (``pkg.mod.Class.method``) belongs to: its
    longest dotted prefix in ``sys.modules``."""
    parts = name.split(".")
    for end in range(len(parts) - 1, 0, -1):
        module = ".".join(parts[:end])
        if module in sys.modules:
            return module
    return None


def code_fingerprint(objects: Iterable[Any]) -> str:
    """A SHA-256 of the bytecode of ``objects`` (functions, and classes' functions, properties,
    static and class methods) and of the code they nest: the same for the same code under the
    same Python, whatever file or notebook cell it came from."""
    digest = hashlib.sha256()
    for item in objects:
        members = sorted(vars(item).items()) if isinstance(item, type) else [("", item)]
        for name, member in members:
            for function in _functions_of(member):
                digest.update(name.encode())
                _hash_code(function.__code__, digest)
    return digest.hexdigest()


def _functions_of(member: Any) -> list[Any]:
    if isinstance(member, staticmethod | classmethod):
        member = member.__func__
    if isinstance(member, property):
        return [f for f in (member.fget, member.fset, member.fdel) if hasattr(f, "__code__")]
    return [member] if isinstance(getattr(member, "__code__", None), types.CodeType) else []


def _hash_code(code: types.CodeType, digest: Any) -> None:
    digest.update(code.co_code)
    digest.update(repr((code.co_names, code.co_varnames)).encode())
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            _hash_code(constant, digest)
        elif isinstance(constant, frozenset):  # its order follows the string hash seed
            digest.update(repr(sorted(map(repr, constant))).encode())
        else:
            digest.update(repr(constant).encode())


def _file_digest(module: str) -> str | None:
    """The SHA-256 of ``module``'s source file; for a module without one (a notebook's
    ``__main__``), of the bytecode of the functions and classes it defines; None where neither
    can be had."""
    loaded = sys.modules.get(module)
    path = getattr(loaded, "__file__", None)
    if not isinstance(path, str):
        own = (
            [
                v
                for v in vars(loaded).values()
                if getattr(v, "__module__", None) == module and (isinstance(v, type) or callable(v))
            ]
            if loaded is not None
            else []
        )
        return code_fingerprint(own) if own else None
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def code_digests(names: Iterable[str]) -> dict[str, str]:
    """The digest of each module of the pipeline's own code among ``names`` (the qualified
    functions the traced samples ran): modules of codedag and of libraries (those codedag knows,
    Python's standard library and packages installed in site-packages, which change with their
    versions) are left out; at most :data:`MAX_CODE_MODULES`."""
    from codedag.backends.libraries import is_library_module

    digests: dict[str, str] = {}
    for name in sorted(names):
        module = _module_of(name)
        top = (module or "").partition(".")[0]
        if module is None or module in digests or top == "codedag" or is_library_module(top):
            continue
        digest = _file_digest(module)
        if digest is not None:
            digests[module] = digest
            if len(digests) == MAX_CODE_MODULES:
                break
    return digests


def changed_code(recorded: Mapping[str, str]) -> list[str]:
    """The modules of ``recorded`` (a stored plan's :func:`code_digests`) loaded in this process
    whose source file is not what the plan was made from; modules not loaded are not checked
    (nothing is imported for it: a stale plan's call sites then match less, never wrongly)."""
    return sorted(
        module
        for module, digest in recorded.items()
        if module in sys.modules and _file_digest(module) != digest
    )

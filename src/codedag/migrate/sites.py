"""Where patching a function means replacing it: its canonical name and every other public path.

The :class:`codedag.patching.Patcher` rebinds references in user modules but not inside the
library's own package, so each public spelling of the same object in the library's namespaces
(``numpy.absolute`` for ``numpy.abs``) is patched as well.
"""

from __future__ import annotations

import sys
from typing import Any

from codedag.backends.names import INDEXED_MODULES
from codedag.errors import MigrationError
from codedag.patching import resolve


def patch_sites(name: str, registry: Any, index: AliasIndex | None = None) -> list[str]:
    """``name`` and every other public path of the same function: what patching it means
    (``index``: the public paths of the libraries' namespaces, made once for many names).

    Raises:
        MigrationError: ``name`` does not resolve.
    """
    _owner, _attr, raw = resolve(name)
    return [name, *alias_paths(name, raw, registry.aliases(name), index)]


class AliasIndex:
    """The public paths of every object in the namespaces :func:`alias_paths` reads, by the
    object's identity: made once, it answers each name's aliases without reading them again."""

    def __init__(self) -> None:
        self._paths: dict[int, list[tuple[object, str]]] = {}  # id -> (object, path)
        self._read: set[str] = set()

    def paths(self, name: str, obj: object) -> list[str]:
        """The public paths of ``obj`` in the namespaces of :data:`INDEXED_MODULES` and of
        ``name``'s module and package."""
        for module_name in _namespaces(name) - self._read:
            self._read.add(module_name)
            namespace = getattr(sys.modules.get(module_name), "__dict__", None)
            if not isinstance(namespace, dict):
                continue
            for attr, value in list(namespace.items()):
                if not attr.startswith("_"):
                    self._paths.setdefault(id(value), []).append((value, f"{module_name}.{attr}"))
        return [path for value, path in self._paths.get(id(obj), []) if value is obj]


def _namespaces(name: str) -> set[str]:
    """The indexed modules, and every package above ``name``: a subpackage re-exports its
    modules' functions (``librosa.feature.delta`` for ``librosa.feature.utils.delta``)."""
    modules = {m for m in INDEXED_MODULES if m in sys.modules}
    parts = name.split(".")[:-1]
    modules.update(".".join(parts[:end]) for end in range(1, len(parts) + 1))
    return modules


def alias_paths(
    name: str, raw: object, registered: set[str], index: AliasIndex | None = None
) -> list[str]:
    """Other public paths of the function ``name`` resolves to (``numpy.absolute`` for
    ``numpy.abs``, ``torch.stft`` for ``torch.functional.stft``).

    The Patcher rebinds references in user modules but not inside the library's own package, so
    each public spelling of the same object in the library's namespaces is patched as well.
    """
    obj = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
    found = set((index or AliasIndex()).paths(name, obj))
    for other in registered:
        try:
            _owner, _attr, value = resolve(other)
        except MigrationError:
            continue
        if (value.__func__ if isinstance(value, staticmethod | classmethod) else value) is obj:
            found.add(other)
    found.discard(name)
    return sorted(found)

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


def patch_sites(name: str, registry: Any) -> list[str]:
    """``name`` and every other public path of the same function: what patching it means.

    Raises:
        MigrationError: ``name`` does not resolve.
    """
    _owner, _attr, raw = resolve(name)
    return [name, *alias_paths(name, raw, registry.aliases(name))]


def alias_paths(name: str, raw: object, registered: set[str]) -> list[str]:
    """Other public paths of the function ``name`` resolves to (``numpy.absolute`` for
    ``numpy.abs``, ``torch.stft`` for ``torch.functional.stft``).

    The Patcher rebinds references in user modules but not inside the library's own package, so
    each public spelling of the same object in the library's namespaces is patched as well.
    """
    obj = raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw
    modules = {m for m in INDEXED_MODULES if m in sys.modules}
    modules.add(name.rsplit(".", 1)[0])
    modules.add(name.split(".", 1)[0])
    found = set()
    for module_name in modules:
        module = sys.modules.get(module_name)
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            if value is obj and not attr.startswith("_"):
                found.add(f"{module_name}.{attr}")
    for other in registered:
        try:
            _owner, _attr, value = resolve(other)
        except MigrationError:
            continue
        if (value.__func__ if isinstance(value, staticmethod | classmethod) else value) is obj:
            found.add(other)
    found.discard(name)
    return sorted(found)

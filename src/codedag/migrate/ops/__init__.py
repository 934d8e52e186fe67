"""Moved to :mod:`codedag.backends.ops`; this old path and its subpackages warn once and give the
new modules.

``import codedag.migrate.ops.cv2`` (or ``.numpy``, ``.pil``, ``.audio``, ``.torch``, and any module
under them) imports the module of the same name under :mod:`codedag.backends.ops` and binds it
under the old name too: both names are one module object, so its functions and ``LIBRARY`` are
the same objects. The first import of this package warns with a DeprecationWarning; a finder
added to ``sys.meta_path`` then maps the names under it.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
from types import ModuleType

from codedag.util.moved import warn_moved

_OLD = __name__
_NEW = "codedag.backends.ops"


class _MovedFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Finds ``codedag.migrate.ops.X`` as the already imported (or now imported) ``X`` under
    :mod:`codedag.backends.ops`."""

    def find_spec(
        self, fullname: str, path: object = None, target: object = None
    ) -> importlib.machinery.ModuleSpec | None:
        if not fullname.startswith(_OLD + "."):
            return None
        return importlib.util.spec_from_loader(fullname, self)

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = importlib.import_module(_NEW + spec.name[len(_OLD) :])
        # importlib sets the old name's spec on the module it gets: exec_module puts its own back
        spec.loader_state = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        """Nothing to run (the new module ran when it was imported): its own spec back."""
        own = module.__spec__.loader_state if module.__spec__ is not None else None
        if own is not None:
            module.__spec__ = own


def __getattr__(name: str) -> ModuleType:
    """``codedag.migrate.ops.cv2`` without importing it first, as a package's attribute."""
    if name.startswith("_"):
        raise AttributeError(name)
    try:
        return importlib.import_module(f"{_OLD}.{name}")
    except ModuleNotFoundError as e:
        raise AttributeError(f"module {_OLD!r} has no attribute {name!r}") from e


if not any(isinstance(f, _MovedFinder) for f in sys.meta_path):
    sys.meta_path.insert(0, _MovedFinder())
warn_moved(_OLD, _NEW)

"""Modules whose import draws from a global random generator, noted while codedag imports.

Importing a module runs its body, and a few draw from Python's or NumPy's global generator there
(``rich.style`` takes ``random.getrandbits(24)``). A script that imports such a module lazily,
after seeding (``librosa.effects`` imports scikit-learn, which imports rich), makes that draw
when it first uses the module; where codedag imports it first (to trace a batch in the script's
process, or to patch a function of it), the draw is left out of the script's stream, and every
draw after it differs from the script's own run. Nothing can put that draw back where the script
would have made it; :func:`noting_import_draws` finds such modules so that the run says so.
"""

from __future__ import annotations

import contextlib
import random
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class ImportDraw:
    """A module whose body drew from a global generator (``module``), and the first module the
    block imported on the way to it (``through``: the one the script would import itself)."""

    module: str
    through: str


def _states() -> tuple[Any, Any]:
    """Python's global random state, and NumPy's where its generator is there to read (NumPy
    imports ``numpy.random`` when first used: a script that seeds it has)."""
    try:
        legacy = sys.modules["numpy.random"].get_state(legacy=False)
        inner = legacy["state"]
        numpy = (inner["pos"], inner["key"].tobytes(), legacy["has_gauss"], legacy["gauss"])
    except (KeyError, AttributeError):  # not imported, or being imported
        numpy = None
    return random.getstate(), numpy


def _drew(before: tuple[Any, Any], after: tuple[Any, Any]) -> bool:
    return before[0] != after[0] or (None not in (before[1], after[1]) and before[1] != after[1])


_own = threading.local()


@contextlib.contextmanager
def own_imports() -> Iterator[None]:
    """Mark the block's imports as codedag's own (rich for its logs): their draws are put back,
    and a script that never imports those modules never makes them, so none is noted."""
    _own.depth = getattr(_own, "depth", 0) + 1
    try:
        yield
    finally:
        _own.depth -= 1


class _Finder:
    """A meta path finder that finds nothing itself: it wraps the ``exec_module`` of the spec
    the other finders give, for that one execution, to compare the generators' states around
    the module's body (a module some import inside it drew in is not noted again)."""

    def __init__(self, found: list[ImportDraw]) -> None:
        self.found = found
        self.owner = threading.current_thread()
        self.executing: list[str] = []  # modules whose bodies run, outermost first
        self.finding = False

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if self.finding or threading.current_thread() is not self.owner:
            return None
        if getattr(_own, "depth", 0):
            return None
        self.finding = True
        try:
            spec = None
            for finder in list(sys.meta_path):
                if finder is not self and hasattr(finder, "find_spec"):
                    spec = finder.find_spec(name, path, target)
                    if spec is not None:
                        break
        finally:
            self.finding = False
        loader = getattr(spec, "loader", None)
        if (
            loader is None
            or isinstance(loader, type)  # built-in and frozen modules: a class's methods
            or not hasattr(loader, "__dict__")
            or "exec_module" in vars(loader)  # a loader shared by modules, already wrapped
        ):
            return spec
        original = loader.exec_module

        def exec_module(module: Any) -> None:
            vars(loader).pop("exec_module", None)
            through = self.executing[0] if self.executing else name
            self.executing.append(name)
            before, noted = _states(), len(self.found)
            try:
                original(module)
            finally:
                self.executing.pop()
                if len(self.found) == noted and _drew(before, _states()):
                    self.found.append(ImportDraw(name, through))

        loader.exec_module = exec_module
        return spec


@contextlib.contextmanager
def noting_import_draws(found: list[ImportDraw]) -> Iterator[None]:
    """Within the block, note in ``found`` every module this thread imports whose body changes
    Python's or NumPy's global random state (each once)."""
    finder = _Finder(found)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)


def draws_line(found: list[ImportDraw], why: str) -> str:
    """One line saying which imports drew and what the script can do about it (``why``: what
    codedag imported them for)."""
    names = ", ".join(
        d.module if d.through == d.module else f"{d.module} (imported by {d.through})"
        for d in found
    )
    first = found[0].through
    return (
        f"codedag imported {names} {why}, and importing it drew from the global random "
        f"generator: the script's own run makes that draw where it first uses {first}, so its "
        f"random draws after that point differ from this run's; import {first} at the top of "
        "the script, before seeding, to keep every batch the script's own"
    )

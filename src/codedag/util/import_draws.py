"""Modules whose import draws from a global random generator, noted while codedag imports, and
their draws made again where a forked process would have imported them.

Importing a module runs its body, and a few draw from Python's or NumPy's global generator there
(``rich.style`` takes ``random.getrandbits(24)``). A script that imports such a module lazily,
after seeding (``librosa.effects`` imports scikit-learn, which imports rich), makes that draw
when it first uses the module; where codedag imports it first (to trace a batch in the script's
process, or to patch a function of it), the draw is left out of the script's stream, and every
draw after it differs from the script's own run. :func:`noting_import_draws` finds such modules
and counts the words of each generator the import took. The script's process gets its state
back (codedag puts every generator back after its work); a process forked from it afterwards (a
DataLoader worker) inherits the module and would never make the draw its own import makes:
:func:`replay_in_forked_children` makes such a child import the module again where its code
first imports it, with the module's body not run a second time but its draws made, word for
word.
"""

from __future__ import annotations

import contextlib
import os
import random
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class ImportDraw:
    """A module whose body drew from a global generator (``module``), the first module the
    block imported on the way to it (``through``: the one the script would import itself), and
    the 32-bit words of Python's and NumPy's global generators importing ``through`` took
    (``None``: not a whole number of words, as a Gaussian kept for the next draw)."""

    module: str
    through: str
    words: tuple[int, int] | None = None


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


_MAX_WORDS = 1 << 16
"""The most words of one generator an import is counted to take (more: not made again)."""


def _words(before: tuple[Any, Any], after: tuple[Any, Any]) -> tuple[int, int] | None:
    """The 32-bit words of Python's and NumPy's generators between two states, or None."""
    python = _python_words(before[0], after[0])
    numpy = 0 if None in (before[1], after[1]) else _numpy_words(before[1], after[1])
    return None if python is None or numpy is None else (python, numpy)


def _python_words(before: Any, after: Any) -> int | None:
    if before[2] != after[2]:  # a Gaussian kept for the next call
        return None
    generator = random.Random()
    generator.setstate(before)
    for count in range(_MAX_WORDS + 1):
        if generator.getstate() == after:
            return count
        generator.getrandbits(32)
    return None


def _numpy_words(before: Any, after: Any) -> int | None:
    if before[2:] != after[2:]:
        return None
    import numpy as np

    generator = np.random.MT19937()
    key = np.frombuffer(before[1], dtype=np.uint32)
    generator.state = {"bit_generator": "MT19937", "state": {"key": key, "pos": before[0]}}
    for count in range(_MAX_WORDS + 1):
        state = generator.state["state"]
        if state["pos"] == after[0] and state["key"].tobytes() == after[1]:
            return count
        generator.random_raw(1)
    return None


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
            outermost = not self.executing
            through = self.executing[0] if self.executing else name
            self.executing.append(name)
            before, noted = _states(), len(self.found)
            try:
                original(module)
            finally:
                self.executing.pop()
                after = _states()
                if len(self.found) == noted and _drew(before, after):
                    self.found.append(ImportDraw(name, through))
                if outermost and len(self.found) > noted:  # what importing ``through`` took
                    words = _words(before, after)
                    self.found[noted:] = [replace(d, words=words) for d in self.found[noted:]]

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


_REPLAYS: dict[str, tuple[int, int]] = {}  # module -> the words its import takes
_replaying = threading.Lock()
_registered = False


def replay_in_forked_children(found: list[ImportDraw]) -> list[ImportDraw]:
    """Make the draws of ``found``'s imports in each process forked from this one from now on,
    where its code first imports the module codedag imported (``through``), until
    :func:`stop_replaying`; the draws that cannot be made again (``words`` None) are returned.

    A forked child (a DataLoader worker) inherits the module, so its own import would take
    nothing. The child forgets the module at its start (``sys.modules`` and the attribute of
    its package); its first import of it finds the same module object again, its body not run
    a second time, and takes the words the import took here from each generator, in the
    child's stream where the script's own child takes them."""
    global _registered
    with _replaying:
        for draw in found:
            if draw.words is not None:
                _REPLAYS.setdefault(draw.through, draw.words)
        if _REPLAYS and not _registered and hasattr(os, "register_at_fork"):
            os.register_at_fork(after_in_child=_forked)
            _registered = True
    return [draw for draw in found if draw.words is None]


def stop_replaying() -> None:
    """Processes forked from now on inherit the modules codedag imported as they are."""
    with _replaying:
        _REPLAYS.clear()


def _forked() -> None:
    """In a forked child: forget the modules whose imports draw, to import them again."""
    if not _REPLAYS:
        return
    modules = {}
    for name, words in _REPLAYS.items():
        module = sys.modules.pop(name, None)
        if module is None:
            continue
        parent, _, child = name.rpartition(".")
        package = sys.modules.get(parent) if parent else None
        if package is not None and getattr(package, child, None) is module:
            with contextlib.suppress(AttributeError):
                delattr(package, child)
        modules[name] = (module, words)
    _REPLAYS.clear()  # the child's own children inherit what it imports again
    if modules:
        sys.meta_path.insert(0, _Replayer(modules))


class _Replayer:
    """A meta path finder that gives a forgotten module back (:func:`_forked`), once each."""

    def __init__(self, modules: dict[str, tuple[Any, tuple[int, int]]]) -> None:
        self.modules = modules

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        found = self.modules.pop(name, None)
        if found is None:
            return None
        import importlib.util  # in a forked child only: no import time where nothing drew

        module, words = found
        original = getattr(module, "__spec__", None)
        loader: Any = _ReplayLoader(module, words, original)
        spec = importlib.util.spec_from_loader(
            name,
            loader,
            origin=getattr(original, "origin", None),
            is_package=hasattr(module, "__path__"),
        )
        if spec is not None and original is not None:
            spec.submodule_search_locations = original.submodule_search_locations
        return spec


class _ReplayLoader:
    """Gives the module object back and makes its import's draws."""

    def __init__(self, module: Any, words: tuple[int, int], spec: Any) -> None:
        self.module, self.words, self.spec = module, words, spec

    def create_module(self, spec: Any) -> Any:
        return self.module

    def exec_module(self, module: Any) -> None:
        python, numpy = self.words
        if python:
            random.getrandbits(32 * python)
        if numpy and "numpy.random" in sys.modules:
            sys.modules["numpy.random"].mtrand._rand._bit_generator.random_raw(numpy)
        if self.spec is not None:
            module.__spec__ = self.spec  # the import set its own

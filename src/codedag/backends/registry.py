"""The registry of migratable functions: one :class:`OpSpec` per canonical name.

Specs come from the ``LIBRARY`` of every ``codedag.backends.ops.<library>`` package that imports
(each loaded on its own, so the registry works with whichever libraries exist), and from
:meth:`Registry.register` (tests, extensions). The default registry loads a package when a name
of its library is first looked up (by the name's top-level module, which the package's
``facts.py`` declares without importing anything), or when every spec is asked for: the six
packages are about 50 modules and 85-100 ms of imports, which a plan placing no call, or only
cv2's, need not pay.

A function has one canonical name: the one :func:`codedag.backends.names.canonical_name` gives its
object, which is what traces and plans carry. Ops are declared under any public name; the first
lookup of a library resolves every declared name to its object once, files the spec under the
object's canonical name and records every other public name of the object (in the library's
namespaces) as an alias. Lookups by any alias find the same spec.

:data:`NON_MIGRATABLE` names what must stay on the CPU whatever a plan says (file and network
I/O, decoders, functions returning views of their input), each with the reason: Python's own I/O
here, the rest declared by each library package (``facts.py``). Each op's tolerance comes with its
declaration; :meth:`Registry.tolerances` gathers them (the table of
:mod:`codedag.backends.tolerances`).
"""

from __future__ import annotations

import importlib
import importlib.metadata
import logging
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any

from codedag.backends import libraries
from codedag.backends.contract import (
    DEVICE,
    FactoryOp,
    Library,
    MoveOnly,
    OpSpec,
    StandardOp,
    Strategy,
    Tolerance,
)
from codedag.backends.derived import MappingView, SequenceView
from codedag.errors import MigrationError

log = logging.getLogger(__name__)

__all__ = [
    "DEVICE",
    "NON_MIGRATABLE",
    "PYTHON_NON_MIGRATABLE",
    "RANDOM_PREFIXES",
    "FactoryOp",
    "MoveOnly",
    "OpSpec",
    "Registry",
    "StandardOp",
    "Strategy",
    "default_registry",
    "is_migratable",
    "list_supported_functions",
    "spec_from_backend",
]

# Python's own functions that must stay on the CPU; each library package declares its own.
PYTHON_NON_MIGRATABLE: dict[str, str] = dict.fromkeys(
    (
        "builtins.open",
        "io.open",
        "os.system",
        "subprocess.run",
        "subprocess.Popen",
        "urllib.request.urlopen",
    ),
    "file or network I/O",
)


def _non_migratable() -> dict[str, str]:
    return {**PYTHON_NON_MIGRATABLE, **libraries.non_migratable()}


NON_MIGRATABLE: Mapping[str, str] = MappingView(_non_migratable)
"""Functions that must stay on the CPU whatever a plan says, with the reason (a view of
:data:`PYTHON_NON_MIGRATABLE` and every library package's ``non_migratable``)."""


def _library_of(name: str, package: str) -> Library:
    facts = libraries.facts_of(name)
    if facts is not None:
        package = facts.name
    elif package not in libraries.ops_packages():
        raise MigrationError(
            f"{name!r}: no library package declares its module, and {package!r} is not one of "
            f"{', '.join(libraries.ops_packages())}"
        )
    library: Library = importlib.import_module(f"codedag.backends.ops.{package}").LIBRARY
    return library


def spec_from_backend(name: str, backend: Callable[..., Any], module: str = "") -> OpSpec:
    """The spec of a backend declared with its library's adapter and default quirks.

    Args:
        name: canonical name of the library function (its top module picks the library).
        backend: the torch implementation with the library's parameters.
        module: the ops package it came from (``cv2``, ``numpy``, ``pil``, ``audio``), when the
            name's module does not tell.

    Raises:
        MigrationError: neither ``name`` nor ``module`` names a library package.
    """
    return _library_of(name, module).declare_backend(name, backend)


def _unwrap(raw: object) -> Any:
    return raw.__func__ if isinstance(raw, staticmethod | classmethod) else raw


class Registry:
    """Specs by canonical name, their aliases, and the NonMigratable list; thread-safe.

    Args:
        specs: initial specs by name (canonicalized on first lookup, like registered ones).
    """

    def __init__(self, specs: Mapping[str, OpSpec] | None = None) -> None:
        self._lock = threading.RLock()
        self._specs: dict[str, OpSpec] = {}
        self._alias: dict[str, str] = {}
        self._aliases_of: dict[str, set[str]] | None = None  # ``_alias`` by canonical name
        self._pending: dict[str, dict[str, OpSpec]] = {}
        self._namespaces: dict[str, tuple[str, ...]] = {}
        self._tolerances: dict[str, Tolerance] = {}
        self._tolerances_view: dict[str, Tolerance] | None = None
        self.non_migratable: dict[str, str] = dict(NON_MIGRATABLE)
        self._libraries: dict[str, Library] = {}
        self._load_errors: dict[str, str] = {}
        self._unloaded: dict[str, str] = {}  # top-level module -> ops package not loaded yet
        for spec in (specs or {}).values():
            self._add(spec)

    @property
    def libraries(self) -> dict[str, Library]:
        """Every loaded ops package's library, by name (every package loaded first)."""
        self.load_all()
        return self._libraries

    @property
    def load_errors(self) -> dict[str, str]:
        """Ops packages that could not be used -> why (every package loaded first)."""
        self.load_all()
        return self._load_errors

    # -- loading ops packages when needed ---------------------------------------------------
    def defer_package(self, package: str, modules: Sequence[str]) -> None:
        """Load the ops ``package`` when a name under one of ``modules`` is first looked up."""
        with self._lock:
            for top in modules:
                self._unloaded[top] = package

    def _load_top(self, top: str) -> None:
        """Load the ops package of the top-level module ``top``, if one waits for it."""
        if top not in self._unloaded:
            return
        with self._lock:
            package = self._unloaded.get(top)
            if package is None:
                return
            for other in [t for t, p in self._unloaded.items() if p == package]:
                del self._unloaded[other]
            self._load_package(package)

    def _load_package(self, package: str) -> None:
        """Load the ops ``package`` and file what its library has imported already."""
        with self._lock:
            _load_ops_module(self, package)
            library = self._libraries.get(package)
            for module in library.facts.modules if library is not None else ():
                if module in sys.modules:  # what is imported already is cheap to file now
                    self._resolve_pending(module, imports=False)

    def load_imported(self) -> None:
        """Load the ops packages waiting for a top-level module this process has imported (a
        script that imported cv2 will have its calls admitted: their backends load now)."""
        for top in [t for t in list(self._unloaded) if t in sys.modules]:
            self._load_top(top)

    def load_all(self) -> None:
        """Load every ops package still waiting."""
        for top in list(self._unloaded):
            self._load_top(top)

    def owner(self, name: str) -> Library | None:
        """The loaded library that owns ``name`` by its top-level module (its package loaded
        first), or None."""
        self._load_top(name.split(".", 1)[0])
        for library in list(self._libraries.values()):
            if library.facts.owns(name):
                return library
        return None

    def refusal(self, name: str) -> str | None:
        """Why ``name`` must stay on the CPU (its library's package loaded first), or None."""
        self._load_top(name.split(".", 1)[0])
        return self.non_migratable.get(name)

    # -- building --------------------------------------------------------------------------
    def _add(self, spec: OpSpec, namespaces: tuple[str, ...] = ()) -> None:
        top = spec.name.split(".", 1)[0]
        with self._lock:
            self._pending.setdefault(top, {})[spec.name] = spec
            self._declare_tolerance(spec.name, spec)
            if namespaces:
                known = self._namespaces.get(top, ())
                self._namespaces[top] = known + tuple(n for n in namespaces if n not in known)

    def add_library(self, library: Library) -> None:
        """Add every spec of an ops package (resolved to canonical names on first lookup)."""
        self._libraries[library.name] = library
        for name, reason in library.non_migratable.items():
            self.non_migratable.setdefault(name, reason)
        for spec in library.specs:
            self._declare_tolerance(spec.name, spec)  # kept on the CPU or not, one table
            if spec.name in self.non_migratable:
                continue
            if _immutable_owner(spec.name):
                self.non_migratable[spec.name] = (
                    "a method of a C type, whose attributes cannot be set"
                )
                continue
            self._add(spec, library.namespaces)

    def register(self, spec: OpSpec) -> None:
        """Add or replace a spec; refused for NonMigratable names."""
        self._load_top(spec.name.split(".", 1)[0])  # a package loaded later would replace it
        if spec.name in self.non_migratable:
            raise MigrationError(
                f"{spec.name!r} cannot be registered: {self.non_migratable[spec.name]}"
            )
        self._add(spec)

    def unregister(self, name: str) -> None:
        """Remove a spec and its aliases (no error when absent)."""
        self._load_top(name.split(".", 1)[0])  # a package loaded later would bring it back
        with self._lock:
            canonical = self._alias.get(name, name)
            self._specs.pop(canonical, None)
            for top_pending in self._pending.values():
                top_pending.pop(name, None)
            for alias in [a for a, c in self._alias.items() if c == canonical]:
                del self._alias[alias]
            self._aliases_of = None
            for key in {name, canonical} & set(self._tolerances):
                del self._tolerances[key]
            self._tolerances_view = None

    def _declare_tolerance(self, name: str, spec: OpSpec, replace: bool = True) -> None:
        tolerance = spec.quirks.tolerance
        if tolerance is not None and (replace or name not in self._tolerances):
            self._tolerances[name] = tolerance
            self._tolerances_view = None

    def _resolve_pending(self, top: str, imports: bool = True) -> None:
        """File the pending specs of the library ``top`` under canonical names, with aliases.

        Without ``imports``, only functions loaded already are filed (nothing is imported: a lazy
        package such as librosa imports its submodules on first attribute access, seconds of
        work for a library the script may never call); the rest stay pending.
        """
        with self._lock:
            pending = self._pending.pop(top, None)
            if not pending:
                return
            from codedag.backends.names import canonical_name
            from codedag.patching import loaded_value, resolve

            public = _public_names(self._namespaces.get(top, ()), imports)
            for name, spec in pending.items():
                try:
                    obj = _unwrap(resolve(name)[2] if imports else loaded_value(name))
                except LookupError:
                    if not imports:  # not loaded yet: filed by a later lookup
                        self._pending.setdefault(top, {})[name] = spec
                        continue
                    log.debug("cannot resolve %s", name)
                    self._file(spec, name, (name,))
                    continue
                except Exception as e:  # library missing or name absent in this version
                    log.debug("cannot resolve %s: %s", name, e)
                    self._file(spec, name, (name,))
                    continue
                canonical = canonical_name(obj)
                if canonical in self.non_migratable and canonical != name:
                    # the same function object under another public name (numpy.permute_dims
                    # is numpy.transpose): NonMigratable under every name
                    self.non_migratable[name] = self.non_migratable[canonical]
                    continue
                names = {name, canonical, *public.get(id(obj), ())}
                self._file(replace(spec, name=canonical), canonical, tuple(sorted(names)))
                self._declare_tolerance(canonical, spec, replace=False)  # the same function

    def _file(self, spec: OpSpec, canonical: str, names: tuple[str, ...]) -> None:
        self._specs[canonical] = spec
        for alias in names:
            if alias not in self.non_migratable:
                self._alias[alias] = canonical
        self._aliases_of = None

    def _canonical(self, name: str) -> str:
        top = name.split(".", 1)[0]
        self._load_top(top)
        known = self._alias.get(name)
        if known is not None:
            return known
        if top in self._pending:  # what was loaded since, then (still unknown) everything
            self._resolve_pending(top, imports=False)
            if name not in self._alias and top in self._pending:
                self._resolve_pending(top)
        return self._alias.get(name, name)

    # -- queries ---------------------------------------------------------------------------
    def canonical(self, name: str) -> str:
        """The canonical name of ``name`` (itself when it is one, or unknown)."""
        return self._canonical(name)

    def get(self, name: str) -> OpSpec | None:
        """The spec of ``name`` (any alias), or ``None`` when unknown or NonMigratable."""
        if name in self.non_migratable:
            return None
        return self._specs.get(self._canonical(name))

    def is_migratable(self, name: str) -> bool:
        """Whether a plan may place ``name`` on a device."""
        return self.get(name) is not None

    def aliases(self, name: str) -> set[str]:
        """Every known name of the same function as ``name`` (``name`` included)."""
        canonical = self._canonical(name)
        with self._lock:
            if self._aliases_of is None:  # read once after each change, not once per name
                self._aliases_of = {}
                for alias, target in self._alias.items():
                    self._aliases_of.setdefault(target, set()).add(alias)
            return self._aliases_of.get(canonical, set()) | {name, canonical}

    def names(self) -> list[str]:
        """Every migratable function, by canonical name."""
        self.load_all()
        for top in list(self._pending):
            self._resolve_pending(top)
        return sorted(n for n in self._specs if n not in self.non_migratable)

    def specs(self) -> list[OpSpec]:
        """The spec of every migratable function."""
        return [self._specs[n] for n in self.names()]

    def tolerances(self) -> dict[str, Tolerance]:
        """``{name: tolerance}`` declared by the ops, sorted by name: under the name each op is
        declared with, and under its canonical name once its library is resolved. Ops declared
        without a tolerance (bit-exact) are absent."""
        if self._unloaded:
            self.load_all()
        view = self._tolerances_view
        if view is None:  # rebuilt after a change only: the run-time check reads it per call
            with self._lock:
                view = self._tolerances_view = dict(sorted(self._tolerances.items()))
        return view

    def by_strategy(self) -> dict[str, list[str]]:
        """``{strategy value: [names]}`` with every strategy present (possibly empty)."""
        out: dict[str, list[str]] = {s.value: [] for s in Strategy}
        for name in self.names():
            out[self._specs[name].strategy.value].append(name)
        return out


def _public_names(namespaces: tuple[str, ...], imports: bool = True) -> dict[int, list[str]]:
    """``{id(object): [module.attr, ...]}`` of the public callables of the namespaces (imported
    first, unless ``imports`` is false: then only those imported already)."""
    found: dict[int, list[str]] = {}
    for module_name in namespaces:
        module = sys.modules.get(module_name)
        if module is None:
            if not imports:
                continue
            try:
                module = importlib.import_module(module_name)
            except Exception:  # an optional library or submodule missing: no aliases from it
                continue
        for attr, value in list(vars(module).items()):
            if not attr.startswith("_") and callable(value) and not isinstance(value, type):
                found.setdefault(id(value), []).append(f"{module_name}.{attr}")
    return found


def _immutable_owner(name: str) -> bool:
    """Whether ``name`` is an attribute of a C type that cannot be set (``numpy.ndarray.sum``).

    Checked only for libraries already imported (the ops packages import NumPy and torch).
    """
    parts = name.split(".")
    if len(parts) < 3 or parts[0] not in sys.modules:
        return False
    owner: Any = sys.modules.get(".".join(parts[:-2]))
    if owner is None:
        return False
    owner = getattr(owner, parts[-2], None)
    return isinstance(owner, type) and bool(owner.__flags__ & (1 << 8))  # Py_TPFLAGS_IMMUTABLETYPE


def ops_modules() -> list[str]:
    """The library packages of ``codedag.backends.ops`` (names not starting with ``_``)."""
    return libraries.ops_packages()


def _load_ops_module(registry: Registry, module: str) -> None:
    try:
        package = importlib.import_module(f"codedag.backends.ops.{module}")
    except Exception as e:  # absent library or a broken package: the others still load
        registry._load_errors[module] = f"{type(e).__name__}: {e}"
        log.warning("backend package %s not loaded: %s", module, e)
        return
    library = getattr(package, "LIBRARY", None)
    if isinstance(library, Library):
        newer = library.facts.unverified_version()
        if newer is not None:
            reason = (
                f"{library.name} {newer} is newer than the releases its backends are verified "
                f"equal to (below {library.facts.verified_below}): its calls stay with it"
            )
            registry._load_errors[module] = reason
            log.warning("backend package %s not used: %s", module, reason)
            library = replace(library, specs=())
        registry.add_library(library)


def build_default_registry() -> Registry:
    """The registry of every importable ops package, each loaded when a name of its library is
    first looked up (see the module docstring; a package whose facts name no module: at once)."""
    registry = Registry()
    modules = {
        f.name: (*f.modules, *(n.split(".", 1)[0] for n in f.file_sources))
        for f in libraries.library_facts()
    }
    for package in ops_modules():
        if modules.get(package):  # a name of its modules or file sources loads it
            registry.defer_package(package, modules[package])
        else:
            registry._load_package(package)
    return registry


_DEFAULT: Registry | None = None
_DEFAULT_LOCK = threading.Lock()


def default_registry() -> Registry:
    """The process-wide registry, built on first use (each ops package imported when a name of
    its library is first looked up)."""
    global _DEFAULT
    if _DEFAULT is None:
        with _DEFAULT_LOCK:
            if _DEFAULT is None:
                _DEFAULT = build_default_registry()
    return _DEFAULT


def list_supported_functions() -> dict[str, list[str]]:
    """Migratable functions by strategy: ``{"MoveOnly": [...], "StandardOp": [...], ...}``."""
    return default_registry().by_strategy()


def is_migratable(name: str) -> bool:
    """Whether the canonical name ``name`` can run through a torch backend.

    The optimizer calls this to decide placement; NonMigratable names (I/O, decoders, views)
    and names without a backend return ``False``.
    """
    return default_registry().is_migratable(name)


def _random_prefixes() -> tuple[str, ...]:
    return libraries.random_prefixes()


RANDOM_PREFIXES: Sequence[str] = SequenceView(_random_prefixes)
"""Prefixes of functions without a spec whose result is not a function of their arguments, as
each library package declares them (Python's ``random`` among them)."""

"""The facts of every library package, and the tables derived from them.

Each package of :mod:`codedag.backends.ops` declares its library's facts in ``facts.py``
(:class:`~codedag.backends.facts.LibraryFacts`). They are read here without running the
package's ``__init__`` (which imports torch and every backend): the tracer, the name index and
the calibration key need them before, or without, any backend. A package without a readable
``facts.py`` is skipped with a warning (the registry then reports it in ``load_errors``).

Everything is cached; :func:`refresh` reads the packages again (a package added at run time).
"""

from __future__ import annotations

import functools
import importlib.machinery
import importlib.util
import logging
import pkgutil
import sys
import types
from collections.abc import Callable, Iterable

from codedag.backends.facts import FileSource, LibraryFacts, Requirement, ThreadPool

log = logging.getLogger(__name__)

OPS_PACKAGE = "codedag.backends.ops"


def ops_packages() -> list[str]:
    """The library packages of ``codedag.backends.ops`` (names not starting with ``_``)."""
    from codedag.backends import ops

    return sorted(
        m.name for m in pkgutil.iter_modules(ops.__path__) if m.ispkg and not m.name.startswith("_")
    )


def _facts_module(package: str) -> object:
    """The ``facts`` module of ``package``, executed without its package's ``__init__``."""
    name = f"{OPS_PACKAGE}.{package}.facts"
    module = sys.modules.get(name)
    if module is not None:
        return module
    parent = sys.modules.get(f"{OPS_PACKAGE}.{package}")
    if parent is not None:
        locations = list(parent.__path__)
    else:
        package_spec = importlib.util.find_spec(f"{OPS_PACKAGE}.{package}")  # runs no code of it
        locations = list(package_spec.submodule_search_locations or ()) if package_spec else []
    spec = importlib.machinery.PathFinder.find_spec(name, locations)
    if spec is None or spec.loader is None:
        raise ImportError(f"{OPS_PACKAGE}.{package} has no facts module")
    module = importlib.util.module_from_spec(spec)
    # registered under its own name: the package's ``from .facts import FACTS`` reuses it
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


@functools.cache
def library_facts() -> tuple[LibraryFacts, ...]:
    """The facts of every library package, in package-name order."""
    found = []
    for package in ops_packages():
        try:
            facts = getattr(_facts_module(package), "FACTS")  # noqa: B009
        except Exception as e:  # a broken package: the others still count
            log.warning("facts of backend package %s not read: %s", package, e)
            continue
        if isinstance(facts, LibraryFacts):
            found.append(facts)
    return tuple(found)


_ON_REFRESH: list[Callable[[], None]] = []
"""What modules built on the facts forget at :func:`refresh` (registered by them on import)."""


def on_refresh(forget: Callable[[], None]) -> None:
    """Call ``forget`` at every :func:`refresh` (a cache of what the facts resolved to)."""
    _ON_REFRESH.append(forget)


def refresh() -> None:
    """Forget what was read: the next call reads every package's facts again."""
    library_facts.cache_clear()
    for derived in _DERIVED:
        derived.cache_clear()
    for forget in _ON_REFRESH:
        forget()


def _unique(names: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(names))


@functools.cache
def indexed_modules() -> tuple[str, ...]:
    """Modules whose public callables define canonical names, in priority order."""
    return _unique(m for facts in library_facts() for m in facts.indexed)


@functools.cache
def python_namespaces() -> tuple[str, ...]:
    """Modules whose public functions are Python implementations named after the namespace."""
    return _unique(m for facts in library_facts() for m in facts.python_namespaces)


@functools.cache
def python_modules() -> tuple[str, ...]:
    """Top-level modules of the libraries that have ``python_namespaces``."""
    return _unique(m for facts in library_facts() if facts.python_namespaces for m in facts.modules)


@functools.cache
def wrapped_modules() -> tuple[str, ...]:
    """Modules whose public C callables the tracer wraps."""
    return _unique(m for facts in library_facts() for m in facts.wrapped)


@functools.cache
def not_wrapped() -> frozenset[str]:
    """Qualified names the tracer never wraps."""
    return frozenset(n for facts in library_facts() for n in facts.not_wrapped)


@functools.cache
def library_packages() -> frozenset[str]:
    """Top-level packages whose code is library code wherever it is installed."""
    return frozenset(
        p for facts in library_facts() for p in (*facts.modules, *facts.library_packages)
    )


@functools.lru_cache(maxsize=1024)
def is_library_module(top: str) -> bool:
    """Whether a top-level module is library code: a library package codedag knows, the standard
    library, or a package installed in site-packages; anything else is user code."""
    if top in library_packages() or top in sys.stdlib_module_names:
        return True
    module = sys.modules.get(top)
    path = getattr(module, "__file__", None)
    if path is None:
        try:
            spec = importlib.util.find_spec(top)
        except (ImportError, ValueError):
            return False
        path = getattr(spec, "origin", None) if spec is not None else None
    return "site-packages" in (path or "") or "dist-packages" in (path or "")


def pipeline_modules() -> list[types.ModuleType]:
    """The loaded modules of the pipeline's own code: ``__main__`` and every module that is not
    codedag's, the standard library's or an installed package's."""
    modules = []
    for name, module in list(sys.modules.items()):
        top = name.partition(".")[0]
        if not isinstance(module, types.ModuleType) or top == "codedag":
            continue
        if name == "__main__" or not is_library_module(top):
            modules.append(module)
    return modules


@functools.cache
def data_types() -> tuple[tuple[str, str], ...]:
    """``(module, attribute)`` of the libraries' data value types."""
    return tuple(dict.fromkeys(t for facts in library_facts() for t in facts.data_types))


@functools.cache
def non_migratable() -> dict[str, str]:
    """Functions of the libraries that must stay on the CPU, with the reason."""
    return {n: r for facts in library_facts() for n, r in facts.non_migratable.items()}


@functools.cache
def random_prefixes() -> tuple[str, ...]:
    """Prefixes of the libraries' functions whose results are random draws."""
    return _unique(p for facts in library_facts() for p in facts.random_prefixes)


@functools.cache
def requirements() -> tuple[Requirement, ...]:
    """What ``codedag doctor`` checks for each library, in package order."""
    return tuple(f.requirement for f in library_facts() if f.requirement is not None)


def facts_of(name: str) -> LibraryFacts | None:
    """The facts of the library that the qualified ``name`` belongs to (by its top module)."""
    for facts in library_facts():
        if facts.owns(name):
            return facts
    return None


def distributions(name: str) -> tuple[str, ...] | None:
    """Distributions whose versions a timing of ``name`` depends on (besides torch), or
    ``None`` when no library package owns ``name``."""
    facts = facts_of(name)
    return facts.distributions if facts is not None else None


@functools.cache
def all_distributions() -> tuple[str, ...]:
    """Every library package's distributions: the versions a value computed by any library's
    functions may depend on."""
    return _unique(d for facts in library_facts() for d in facts.distributions)


@functools.cache
def file_sources() -> dict[str, FileSource]:
    """Functions reading a file that a prefix cache chain may start at, by the public name each
    library declares (:mod:`codedag.backends.sources` finds them by canonical name)."""
    return {n: s for facts in library_facts() for n, s in facts.file_sources.items()}


@functools.cache
def library_modules() -> frozenset[str]:
    """Top-level modules of every library package (``cv2``, ``PIL``, ``numpy``, ``torch``)."""
    return frozenset(m for facts in library_facts() for m in facts.modules)


@functools.cache
def protocol_modules() -> tuple[str, ...]:
    """Top-level modules of the libraries whose functions take values through protocols
    (``__array__``, ``__torch_function__``): a stand-in value reaches them as it is."""
    return _unique(m for facts in library_facts() if facts.protocols for m in facts.modules)


@functools.cache
def modules_taking(protocol: str) -> tuple[str, ...]:
    """Top-level modules of the libraries whose functions take any object with ``protocol``
    (``__array__``; ``__getitem__``: a sequence)."""
    return _unique(
        m for facts in library_facts() if protocol in facts.protocols for m in facts.modules
    )


PYTHON_MODULES = ("builtins.", "operator.", "math.")
"""Prefixes of Python's own modules: their functions take a stand-in value through its operators
and methods (``len``, indexing, ``float``), or take no array at all."""


def takes_any_value(name: str) -> bool:
    """Whether function ``name`` takes a stand-in value as it is: a function of Python's own
    modules, or of a library declaring the protocols it takes values through (``facts.py``:
    NumPy's ``__array_function__``, torch's ``__torch_function__``), but not one it declares
    to take its own arrays only (``torch.from_numpy``)."""
    return name not in arrays_only() and library_takes_any_value(name)


def library_takes_any_value(name: str) -> bool:
    """Whether the library of function ``name`` takes stand-in values (:func:`takes_any_value`
    of its functions but the few it declares to take its own arrays only)."""
    return name.startswith(PYTHON_MODULES) or name.split(".", 1)[0] in protocol_modules()


@functools.cache
def arrays_only() -> frozenset[str]:
    """The functions of libraries with protocols that take their own arrays only, all the same
    (:attr:`~codedag.backends.facts.LibraryFacts.arrays_only`)."""
    return frozenset(name for facts in library_facts() for name in facts.arrays_only)


@functools.cache
def thread_pools() -> tuple[tuple[LibraryFacts, ThreadPool], ...]:
    """The libraries with a thread pool of their own, and the pool (module: ``modules[0]``)."""
    return tuple((f, f.thread_pool) for f in library_facts() if f.thread_pool is not None)


_DERIVED = (
    all_distributions,
    arrays_only,
    indexed_modules,
    python_namespaces,
    python_modules,
    wrapped_modules,
    not_wrapped,
    library_packages,
    data_types,
    non_migratable,
    random_prefixes,
    requirements,
    file_sources,
    library_modules,
    protocol_modules,
    modules_taking,
    thread_pools,
)

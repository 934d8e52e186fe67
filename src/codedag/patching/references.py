"""Finding the references to a function that other modules hold, for :mod:`codedag.patching`.

Patching must not depend on how user code spelled a call, and restore must not leave a
replacement behind, so both search the module namespaces for an object by identity:

* at patch time (:func:`reference_sites`): module attributes (``from cv2 import resize``) and the
  entries of the small dicts and lists modules hold, two levels deep (``{"flip": cv2.flip}``);
* at restore (:func:`sweep_modules`): the same, plus, in modules imported while patched, the
  attributes of the classes they define and of the plain objects they hold;
* from given objects (:func:`reachable_sites`: a data set, a script's namespace), a few levels
  deep through attributes, lists and dicts, including ``functools.partial`` objects that bind the
  function (``partial(cv2.resize, dsize=(64, 64))`` in a transform list).

Membership is tested in C (set operations on ids): most containers hold no target.
"""

from __future__ import annotations

import functools
import sys
import types
from collections import deque
from collections.abc import Collection, Iterable, Iterator
from dataclasses import dataclass
from types import ModuleType
from typing import Any


@dataclass(slots=True)
class Site:
    """One place that held the original: ``container[key]`` (``item``) or an attribute."""

    container: Any
    key: Any
    item: bool

    def set(self, value: object) -> None:
        if self.item:
            self.container[self.key] = value
        else:
            setattr(self.container, self.key, value)


class PartialSite(Site):
    """A ``functools.partial`` whose function is the original: set through its pickling state
    (``func`` is read-only; the state keeps its arguments and attributes)."""

    def set(self, value: object) -> None:
        bound = self.container
        _func, args, keywords, namespace = bound.__reduce__()[2]
        bound.__setstate__((value, args, keywords, namespace))


def unwrap_descriptor(value: object) -> Any:
    if isinstance(value, (staticmethod, classmethod)):  # a tuple: faster than a union
        return value.__func__
    return value


def package_of(obj: object) -> str:
    module = getattr(obj, "__module__", None) or ""
    return module.split(".", 1)[0]


# Packages that never hold user-bound references to preprocessing functions; skipping them keeps a
# reference scan in the milliseconds even with torch imported.
SCAN_SKIP = frozenset(
    {
        "codedag",
        "torch",
        "torchgen",
        "numpy",
        "scipy",
        "sympy",
        "matplotlib",
        "rich",
        "pydantic",
        "pydantic_core",
        "_pytest",
        "pytest",
        "hypothesis",
        "IPython",
        "jedi",
        "pygments",
        "numba",
        "llvmlite",
        "mpmath",
    }
)


# Standard-library modules import no third-party package, so they cannot bind a library function
# at import time; a reference scan skips them unless a target itself comes from the standard
# library (``from math import floor`` inside another standard module). ``builtins`` stays: user
# code may put a function there.
_STDLIB = frozenset(sys.stdlib_module_names) - {"builtins", "__main__"}


def _from_stdlib(packages: Iterable[str]) -> bool:
    """Whether any of these top packages is the standard library's (``builtins`` included)."""
    return not sys.stdlib_module_names.isdisjoint(packages)


# Containers found in a module namespace are searched when they are small enough: a dict or list
# of functions (``AUGMENTATIONS = {"flip": cv2.flip}``) and, one level down, the dicts and lists
# it holds. Big containers are data, not registries of functions.
_MAX_ITEMS = 4096
_MAX_NESTED_PARENT = 64
_MAX_NESTED_ITEMS = 256


def _hits(container: Any, targets: dict[int, Any]) -> Iterator[tuple[Any, Site]]:
    """``(value, site)`` for the items of a dict or list that are targets.

    The membership test runs in C (a set intersection of ids): most containers hold none.
    """
    values = container.values() if type(container) is dict else container
    if targets.keys().isdisjoint(map(id, values)):
        return
    items = container.items() if type(container) is dict else enumerate(container)
    for key, value in list(items):
        target = targets.get(id(value))
        if target is not None and target is value:
            yield value, Site(container, key, item=True)


def _container_sites(
    container: Any, targets: dict[int, Any], nested: bool, instances: bool
) -> Iterator[tuple[Any, Site]]:
    """``(value, site)`` for the items of a dict or list that are targets; one level deeper
    when ``nested`` (dicts, lists and, with ``instances``, plain objects' ``__dict__``)."""
    yield from _hits(container, targets)
    values = list(container.values() if type(container) is dict else container)
    if not nested or len(values) > _MAX_NESTED_PARENT:
        return
    inner = values if instances else [v for v in values if type(v) is dict or type(v) is list]
    for value in inner:
        searchable = _searchable(value, instances)
        if searchable is not None and 0 < len(searchable) <= _MAX_NESTED_ITEMS:
            yield from _container_sites(searchable, targets, False, instances)


def _searchable(value: object, instances: bool) -> Any:
    """The dict or list to search inside ``value`` (its ``__dict__`` for a plain object)."""
    kind = type(value)
    if kind is dict or kind is list:
        return value
    if not instances or isinstance(value, type | ModuleType) or callable(value):
        return None
    if package_of(kind) in SCAN_SKIP:
        return None
    namespace = getattr(value, "__dict__", None)
    return namespace if type(namespace) is dict else None


def _class_sites(
    cls: type, targets: dict[int, Any], *, descriptors: bool
) -> Iterator[tuple[Any, Site]]:
    """``(value, site)`` for a class's attributes that are targets; with ``descriptors`` also
    those a ``staticmethod`` or ``classmethod`` wraps (the value is then the descriptor)."""
    attributes = vars(cls)
    found = attributes.values()
    if targets.keys().isdisjoint(map(id, map(unwrap_descriptor, found) if descriptors else found)):
        return  # most classes hold none (tested in C)
    for attr, raw in list(attributes.items()):
        inner = unwrap_descriptor(raw) if descriptors else raw
        target = targets.get(id(inner))
        if target is not None and target is inner:
            yield raw, Site(cls, attr, item=False)


def _namespace_sites(
    module: ModuleType, targets: dict[int, Any], *, instances: bool, classes: bool
) -> Iterator[tuple[Any, Site]]:
    """Every place in a module namespace that holds a target: its attributes, the small dicts
    and lists it holds (two levels), with ``instances`` the attributes of objects it holds, and
    with ``classes`` the attributes of the classes it defines (raw or inside a
    ``staticmethod``/``classmethod``)."""
    namespace = getattr(module, "__dict__", None)
    if not isinstance(namespace, dict):
        return
    yield from _hits(namespace, targets)
    values = list(namespace.values())
    if classes or instances:
        module_name = getattr(module, "__name__", None)
        for value in values:
            if classes and isinstance(value, type) and value.__module__ == module_name:
                yield from _class_sites(value, targets, descriptors=True)
                continue
            searchable = _searchable(value, instances)
            if searchable is not None and 0 < len(searchable) <= _MAX_ITEMS:
                yield from _container_sites(searchable, targets, True, instances)
        return
    for value in [v for v in values if type(v) is dict or type(v) is list]:
        if 0 < len(value) <= _MAX_ITEMS:
            yield from _container_sites(value, targets, True, instances)


def reference_sites(targets: dict[int, tuple[Any, set[str], Any, str]]) -> dict[int, list[Site]]:
    """Find, in one pass over ``sys.modules``, the places other modules bound each original.

    Args:
        targets: ``id(original) -> (original, packages to skip, owner, attribute)``.

    Returns:
        ``id(original) -> sites`` (module attributes and the entries of module-level dicts and
        lists). Modules of the original's own package (its internals) are skipped, and the
        standard library's unless a target comes from it: the point is to catch user code that
        bound the function at import time (``from cv2 import resize``).
    """
    found: dict[int, list[Site]] = {key: [] for key in targets}
    if not targets:
        return found
    objects = {key: target[0] for key, target in targets.items()}
    # A package every target skips (the targets' own library, most often) need not be searched;
    # nor the standard library unless a target comes from it.
    skips = [target[1] for target in targets.values()]
    skipped = set(SCAN_SKIP).union(set.intersection(*map(set, skips)))
    if not any(_from_stdlib(skip) for skip in skips):
        skipped |= _STDLIB
    for module_name, module in list(sys.modules.items()):
        top = module_name.split(".", 1)[0]
        if module is None or top in skipped:
            continue
        for value, site in _namespace_sites(module, objects, instances=False, classes=False):
            _original, skip, owner, attribute = targets[id(value)]
            if top in skip:
                continue
            if site.container is getattr(owner, "__dict__", None) and site.key == attribute:
                continue  # the primary site, patched by name
            found[id(value)].append(site)
    return found


def sweep_modules(
    replacements: dict[int, tuple[Any, Any]],
    new_modules: set[str],
    origins: Collection[str] | None = None,
) -> int:
    """Put originals back wherever a module namespace still reaches a replacement.

    Args:
        replacements: ``id(replacement) -> (replacement, original)``.
        new_modules: modules imported while the patches were applied: searched even inside the
            packages a patch scan skips (a library module imported then may have bound a
            replacement too). Older modules of those packages are not searched.
        origins: the top packages the originals come from (``cv2`` for ``cv2.resize``): older
            standard modules are searched only when one is the standard library's (always
            when None).

    Returns:
        How many references were put back.
    """
    targets = {key: pair[0] for key, pair in replacements.items()}
    # As at patch time, an older standard module is searched only for a standard original.
    skipped = SCAN_SKIP if origins is None or _from_stdlib(origins) else SCAN_SKIP | _STDLIB
    count = 0
    for module_name, module in list(sys.modules.items()):
        top = module_name.split(".", 1)[0]
        if module is None or top == "codedag":
            continue
        new = module_name in new_modules
        if top in skipped and not new:
            continue
        # A module imported while patched may hold replacements anywhere it put them at import;
        # an older one only where user code stores functions at run time (dicts and lists).
        for value, site in _namespace_sites(module, targets, instances=new, classes=new):
            inner = unwrap_descriptor(value)
            original = replacements[id(inner)][1]
            if isinstance(value, staticmethod | classmethod):
                original = type(value)(original)
            site.set(original)
            count += 1
    return count


# What a walk from given objects descends into, and how far: the transforms a data set holds
# (``self.transform.transforms[2]``) sit three or four levels down; bigger containers are data.
_REACH_DEPTH = 4
_REACH_OBJECTS = 20_000
_ATOMS = frozenset({str, bytes, int, float, bool, complex, type(None)})
_NOT_WALKED = (type, ModuleType, types.FunctionType, types.MethodType, types.BuiltinFunctionType)


def reachable_sites(roots: Iterable[object], targets: dict[int, Any]) -> Iterator[tuple[Any, Site]]:
    """``(value, site)`` for every place reachable from ``roots`` that holds a target.

    A root module contributes its attributes and its own classes' attributes; from there (and
    from any other root) the walk goes through the items of lists, tuples and dicts and the
    attributes of plain objects, ``_REACH_DEPTH`` levels down, at most ``_REACH_OBJECTS``
    objects, and finds ``functools.partial`` objects whose function is a target (a tuple's own
    items cannot be set: only what they hold is). Containers of more than
    ``_MAX_NESTED_ITEMS`` items are data: skipped (a root module's namespace excepted).

    Args:
        roots: modules and objects to start from.
        targets: ``id(original) -> original``.
    """
    seen: set[int] = set()
    frontier: deque[tuple[Any, int]] = deque()  # breadth first: each object at its least depth
    for root in roots:
        if isinstance(root, ModuleType):
            if id(root) in seen:
                continue
            seen.add(id(root))
            yield from _module_hits(root, targets)
            namespace = list(vars(root).items())
            frontier += [(v, 1) for k, v in namespace if not k.startswith("__") and _walked(v)]
        else:
            frontier.append((root, 0))
    while frontier and len(seen) < _REACH_OBJECTS:
        obj, level = frontier.popleft()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if type(obj) is functools.partial:
            target = targets.get(id(obj.func))
            if target is not None and target is obj.func:
                yield target, PartialSite(obj, None, False)
            continue
        if type(obj) is tuple:  # nothing to set in it; what it holds may be
            values: Any = obj if len(obj) <= _MAX_NESTED_ITEMS else ()
        else:
            container = _walked_container(obj)
            if container is None or len(container) > _MAX_NESTED_ITEMS:
                continue
            yield from _hits(container, targets)
            values = container.values() if type(container) is dict else container
        if level < _REACH_DEPTH:
            frontier += [(v, level + 1) for v in list(values) if _walked(v)]


def _module_hits(module: ModuleType, targets: dict[int, Any]) -> Iterator[tuple[Any, Site]]:
    """A module's attributes that are targets, and its own classes' plain attributes (one in a
    ``staticmethod`` stays: put back, it would lose the wrapper)."""
    namespace = vars(module)
    yield from _hits(namespace, targets)
    for value in list(namespace.values()):
        if isinstance(value, type) and value.__module__ == module.__name__:
            yield from _class_sites(value, targets, descriptors=False)


def _walked(value: object) -> bool:
    kind = type(value)
    if kind in _ATOMS or isinstance(value, _NOT_WALKED):
        return False
    walked = _WALKED_TYPES.get(kind)
    if walked is None:  # the standard library's objects hold no transforms: a logger, a path
        top = (getattr(kind, "__module__", None) or "").partition(".")[0]
        walked = top in _STDLIB_WALKED or top not in _STDLIB_ALL
        # codedag's own objects hold the originals on purpose (a placed call's wrapper falls
        # back to it): a script's migrator in a module global is never walked into
        walked = _WALKED_TYPES[kind] = walked and top != _OWN_PACKAGE
    return walked


_WALKED_TYPES: dict[type, bool] = {}
_OWN_PACKAGE = __name__.partition(".")[0]
_STDLIB_ALL = frozenset(sys.stdlib_module_names) | {
    "_frozen_importlib",
    "_frozen_importlib_external",
}
_STDLIB_WALKED = frozenset({"builtins", "functools", "types", "collections"})
"""Standard modules whose objects are walked: containers, ``functools.partial``,
``types.SimpleNamespace``, ``collections``' containers."""


def _walked_container(obj: object) -> Any:
    """The dict or list to search in ``obj`` (a plain object's ``__dict__``), or None."""
    kind = type(obj)
    if kind is dict or kind is list:
        return obj
    try:
        namespace = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return None
    return namespace if type(namespace) is dict else None

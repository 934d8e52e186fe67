"""The one owner of monkeypatches: replace functions by qualified name and put the originals back.

Both the tracer (recording wrappers during a tracing window) and the migrator (GPU backends) go
through a :class:`Patcher`. It

* resolves a canonical qualified name (``cv2.resize``, ``PIL.Image.Image.resize``) to the object
  that owns the attribute, and replaces the attribute with ``factory(original)``;
* also rebinds references to the same original object that other modules bound at import time
  (``from cv2 import resize``, or a module-level dict or list such as ``{"resize": cv2.resize}``),
  so that patching does not depend on how user code spelled the call;
* records every site it touched and restores the exact original objects, idempotently;
* makes restore complete: modules imported while the patches were applied may have bound the
  replacements (``from numpy import sin`` in a module imported inside the window, a dict of
  patched functions built then, a class attribute). :meth:`Patcher.restore` sweeps every module
  namespace and the dicts and lists it holds (two levels deep); in modules imported while
  patched, also the attributes of the classes it defines and of the plain objects it holds; it
  puts the originals back wherever a replacement is found;
* on request (:meth:`Patcher.rebind_within`), rebinds the references held inside given objects,
  a data set's transforms and the ``functools.partial`` objects among them, and puts those back
  too;
* is thread-safe and exception-safe: a failure half-way rolls back what was already applied.

What the sweep cannot reach (a closure, a ``functools.partial`` made while patched, a local
variable) still holds the replacement after restore; the migrator's replacements then forward to
the original without doing or counting anything (see
:meth:`codedag.migrate.wrapper.UniversalWrapper.deactivate`).

:func:`active_patches` lists what any live patcher has applied; the test suite uses it to fail a
test that leaves something patched. This package imports nothing of codedag but ``errors``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import logging
import sys
import threading
import weakref
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any

from codedag.errors import MigrationError
from codedag.patching.references import (
    Site,
    package_of,
    reachable_sites,
    reference_sites,
    sweep_modules,
    unwrap_descriptor,
)

log = logging.getLogger(__name__)

ORIGINAL_ATTR = "__codedag_original__"

_LIVE_PATCHERS: weakref.WeakSet[Patcher] = weakref.WeakSet()


@dataclass(slots=True)
class PatchRecord:
    """What one patch changed: the original, its replacement and every site rebound."""

    name: str
    original: Any
    replacement: Any
    sites: list[Site] = field(default_factory=list)
    # sys.getrefcount(replacement) once its batch was applied: more at restore means a reference
    # the patcher did not make (0: unknown, always swept)
    references: int = 0

    @property
    def site_count(self) -> int:
        """Number of places that now hold the replacement."""
        return len(self.sites)


_DESCRIPTORS = (staticmethod, classmethod)
_MISSING = object()


def resolve(qualified_name: str) -> tuple[Any, str, Any]:
    """Resolve ``qualified_name`` to ``(owner, attribute, current value)``.

    The longest importable module prefix is imported, the rest is walked as attributes:
    ``PIL.Image.Image.resize`` -> owner ``PIL.Image.Image`` (a class), attribute ``resize``.

    Raises:
        MigrationError: when no prefix imports or an attribute along the path is missing.
    """
    prefix, _, attribute = qualified_name.rpartition(".")
    module = sys.modules.get(prefix)
    if type(module) is ModuleType and attribute and attribute in vars(module):
        return module, attribute, vars(module)[attribute]  # the common case: a module's own
    parts = qualified_name.split(".")
    if len(parts) < 2 or not all(parts):
        raise MigrationError(
            f"expected a qualified name such as 'cv2.resize', got {qualified_name!r}"
        )
    module = None
    split = 0
    for i in range(len(parts) - 1, 0, -1):
        candidate = ".".join(parts[:i])
        try:
            module = sys.modules.get(candidate) or importlib.import_module(candidate)
        except ImportError:
            continue
        split = i
        break
    if module is None:
        raise MigrationError(f"cannot import any module prefix of {qualified_name!r}")
    owner: Any = module
    for part in parts[split:-1]:
        try:
            owner = getattr(owner, part)
        except AttributeError as e:
            raise MigrationError(f"{qualified_name!r}: {owner!r} has no attribute {part!r}") from e
    attribute = parts[-1]
    if not hasattr(owner, attribute):
        raise MigrationError(f"{qualified_name!r}: {owner!r} has no attribute {attribute!r}")
    return owner, attribute, _raw(owner, attribute)


def addressable(qualified_name: str) -> bool:
    """Whether ``qualified_name`` can name a module attribute at all: a function made inside
    another (``<locals>``) or a lambda is traced under its ``__qualname__``, which no attribute
    path reaches, so it can never be patched."""
    return "<" not in qualified_name


def loaded_value(qualified_name: str) -> Any:
    """The current value of ``qualified_name`` without importing anything.

    Only modules already in ``sys.modules`` and their own attributes are read: a module's
    ``__getattr__`` is never called, since lazy packages (librosa, SciPy) import a submodule
    through it, which can take seconds.

    Raises:
        LookupError: a module on the path is not imported yet, or an attribute is missing.
    """
    parts = qualified_name.split(".")
    split = next((i for i in range(len(parts) - 1, 0, -1) if ".".join(parts[:i]) in sys.modules), 0)
    if split == 0:
        raise LookupError(f"{qualified_name!r}: its module is not imported")
    owner: Any = sys.modules[".".join(parts[:split])]
    for i in range(split, len(parts)):
        part = parts[i]
        if isinstance(owner, ModuleType):
            found = vars(owner).get(part, _MISSING)
            if found is _MISSING:
                found = sys.modules.get(".".join(parts[: i + 1]), _MISSING)
            if found is _MISSING:
                raise LookupError(f"{qualified_name!r}: {owner.__name__}.{part} is not loaded")
            owner = found
        else:
            try:
                owner = getattr(owner, part) if i < len(parts) - 1 else _raw(owner, part)
            except AttributeError as error:
                raise LookupError(f"{qualified_name!r}: {error}") from None
    return owner


def _raw(owner: Any, attribute: str) -> Any:
    """``owner.attribute``, read from the class's own dict where it is there (so static and
    class methods keep their wrappers, as :func:`resolve` returns them)."""
    own = getattr(owner, "__dict__", {})
    return own[attribute] if attribute in own else getattr(owner, attribute)


def _skip_packages(original: object, owner: object) -> set[str]:
    skip = {package_of(original), package_of(owner)}
    if isinstance(owner, ModuleType):
        skip.add(owner.__name__.split(".", 1)[0])
    return skip


class Patcher:
    """Apply and restore patches by qualified name; see the module docstring.

    Args:
        label: names this patcher in :func:`active_patches`.
        stable_references: the references to each replacement that exist once it is applied
            (a factory's cache) stay while it is applied: restore then sweeps the modules only
            for replacements whose reference count grew (something bound them), not for all.

    Example:
        >>> patcher = Patcher()
        >>> patcher.patch("json.dumps", lambda orig: orig)  # doctest: +SKIP
        >>> patcher.restore()  # doctest: +SKIP
    """

    def __init__(self, label: str = "codedag", *, stable_references: bool = False) -> None:
        self.label = label
        self.stable_references = stable_references
        self._lock = threading.RLock()
        self._records: dict[str, PatchRecord] = {}
        # Modules present when the first patch was applied: the others were imported inside the
        # window, and restore searches them all.
        self._modules_before: frozenset[str] | None = None
        # id(replacement) -> references to it the patcher dropped (sites put back, records
        # removed) in earlier partial restores
        self._released: dict[int, int] = {}
        _LIVE_PATCHERS.add(self)

    def patch(
        self,
        qualified_name: str,
        factory: Callable[[Callable[..., Any]], Callable[..., Any]],
        *,
        rebind_references: bool = True,
    ) -> PatchRecord:
        """Replace ``qualified_name`` with ``factory(original)``; a second call is a no-op.

        Args:
            qualified_name: canonical name of the function to replace.
            factory: builds the replacement from the original callable.
            rebind_references: also replace references to the original held by other modules.

        Returns:
            The record of the patch (the existing one when already patched by this patcher).

        Raises:
            MigrationError: the name does not resolve, is not callable, is already patched by
                another patcher, or cannot be set.
        """
        with self._lock:
            if qualified_name in self._records:
                return self._records[qualified_name]
            self.patch_many([qualified_name], lambda _name, orig: factory(orig), rebind_references)
            return self._records[qualified_name]

    def patch_many(
        self,
        names: Iterable[str],
        factory: Callable[[str, Callable[..., Any]], Callable[..., Any]],
        rebind_references: bool = True,
    ) -> list[PatchRecord]:
        """Patch every name or none, with one reference scan for all of them.

        ``factory(name, original)`` builds each replacement. Names this patcher already patched
        are left as they are. On any failure everything this call applied is undone and the
        error propagates.
        """
        return self._patch([("", names, factory)], (), rebind_references)[0]

    def patch_groups(
        self,
        groups: Iterable[
            tuple[str, Iterable[str], Callable[[str, Callable[..., Any]], Callable[..., Any]]]
        ],
        errors: tuple[type[BaseException], ...] = (MigrationError,),
    ) -> dict[str, BaseException]:
        """Patch each group ``(key, names, factory)`` all or none, apart from the other groups,
        with one reference scan for all of them (a scan reads every module namespace: one per
        group would cost as many).

        Returns:
            ``key -> error`` for the groups left unpatched because installing them raised one of
            ``errors``; any other error undoes everything this call applied and propagates.
        """
        return self._patch(groups, errors, True)[1]

    def _patch(
        self,
        groups: Iterable[
            tuple[str, Iterable[str], Callable[[str, Callable[..., Any]], Callable[..., Any]]]
        ],
        errors: tuple[type[BaseException], ...],
        rebind: bool,
    ) -> tuple[list[PatchRecord], dict[str, BaseException]]:
        with self._lock:
            if self._modules_before is None:
                self._modules_before = frozenset(sys.modules)
            applied: list[PatchRecord] = []
            failures: dict[str, BaseException] = {}
            seen: set[str] = set()
            try:
                for key, names, factory in groups:
                    try:
                        applied += self._install_all(names, factory, seen)
                    except errors as error:
                        failures[key] = error
                if rebind:
                    self._rebind(applied)
            except BaseException:
                for record in reversed(applied):
                    self._undo(record)
                if not self._records:
                    self._modules_before = None
                raise
            self._commit(applied)
            return applied, failures

    def _install_all(
        self,
        names: Iterable[str],
        factory: Callable[[str, Callable[..., Any]], Callable[..., Any]],
        seen: set[str],
    ) -> list[PatchRecord]:
        """Install ``names`` (those not yet patched nor in ``seen``); all or none."""
        applied: list[PatchRecord] = []
        try:
            for name in names:
                if name in self._records or name in seen:
                    continue
                applied.append(self._install(name, factory))
                seen.add(name)
        except BaseException:
            for record in reversed(applied):
                self._undo(record)
                seen.discard(record.name)
            raise
        return applied

    def _rebind(self, applied: list[PatchRecord]) -> None:
        """Point the references other modules hold to each original at its replacement."""
        if not applied:
            return
        targets = {}
        for record in applied:
            original = unwrap_descriptor(record.original)
            owner = record.sites[0].container
            targets[id(original)] = (
                original,
                _skip_packages(original, owner),
                owner,
                record.sites[0].key,
            )
        sites = reference_sites(targets)
        for record in applied:
            for site in sites[id(unwrap_descriptor(record.original))]:
                site.set(record.replacement)
                record.sites.append(site)

    def rebind_within(self, roots: Iterable[object]) -> int:
        """Point the references to the patched originals reachable from ``roots`` at their
        replacements; :meth:`restore` puts them back.

        Reaches what a module scan does not: a data set's attributes, the lists and dicts of
        transforms it holds, ``functools.partial(cv2.resize, ...)`` inside them (see
        :func:`codedag.patching.references.reachable_sites`). Roots may be modules.

        Returns:
            How many references were rebound.
        """
        with self._lock:
            by_original: dict[int, PatchRecord] = {}
            for record in self._records.values():
                by_original.setdefault(id(unwrap_descriptor(record.original)), record)
            if not by_original:
                return 0
            targets = {key: unwrap_descriptor(r.original) for key, r in by_original.items()}
            count = 0
            for value, site in list(reachable_sites(roots, targets)):
                record = by_original[id(value)]
                site.set(record.replacement)
                record.sites.append(site)
                if record.references:
                    record.references += 1  # a reference the patcher made: no sweep for it
                count += 1
            return count

    def _commit(self, applied: list[PatchRecord]) -> None:
        debug = log.isEnabledFor(logging.DEBUG)
        for record in applied:
            self._records[record.name] = record
            if debug:
                log.debug("patched %s at %d site(s)", record.name, record.site_count)
        for record in applied:  # every site of the batch is set: the baseline of restore
            record.references = sys.getrefcount(record.replacement)

    def _install(
        self, qualified_name: str, factory: Callable[[str, Callable[..., Any]], Callable[..., Any]]
    ) -> PatchRecord:
        owner, attribute, raw = resolve(qualified_name)
        descriptor = isinstance(raw, _DESCRIPTORS)
        original = raw.__func__ if descriptor else raw
        if not callable(original):
            raise MigrationError(f"{qualified_name!r} is {type(original).__name__}, not callable")
        if getattr(original, ORIGINAL_ATTR, None) is not None:
            raise MigrationError(f"{qualified_name!r} is already patched by another patcher")
        replacement = factory(qualified_name, original)
        # A builtin or slotted replacement cannot carry the marker; identity checks still work.
        # (try, not contextlib.suppress: a tracing window patches hundreds of names)
        try:  # noqa: SIM105
            setattr(replacement, ORIGINAL_ATTR, original)
        except (AttributeError, TypeError):
            pass
        installed: Any = type(raw)(replacement) if descriptor else replacement
        try:
            setattr(owner, attribute, installed)
        except (AttributeError, TypeError) as e:
            raise MigrationError(
                f"cannot patch {qualified_name!r}: {getattr(owner, '__name__', owner)!r} "
                f"does not allow setting {attribute!r} (a C type's attributes are read-only)"
            ) from e
        return PatchRecord(qualified_name, raw, replacement, [Site(owner, attribute, False)])

    def _undo(self, record: PatchRecord) -> None:
        sites = record.sites
        if len(sites) > 1:
            original = unwrap_descriptor(record.original)
            for site in reversed(sites[1:]):
                site.set(original)
        sites[0].set(record.original)  # the primary site gets the descriptor back

    def restore(self, qualified_name: str | None = None) -> int:
        """Put back the exact original objects (all patches, or one); returns how many.

        Besides the sites recorded when patching, every module namespace is swept for the
        replacements being removed (see the module docstring), so that a module imported while
        the patches were applied does not keep them. With ``stable_references``, a replacement
        whose reference count did not grow is held nowhere new: it needs no sweep.
        """
        with self._lock:
            names = [qualified_name] if qualified_name is not None else list(self._records)
            removed = [self._records.pop(n) for n in reversed(names) if n in self._records]
            elsewhere = {id(r.replacement) for r in removed if self._held_elsewhere(r)}
            debug = log.isEnabledFor(logging.DEBUG)
            for record in removed:
                self._undo(record)
                key = id(record.replacement)
                self._released[key] = self._released.get(key, 0) + len(record.sites) + 1
                if debug:
                    log.debug("restored %s", record.name)
            swept = [r for r in removed if id(r.replacement) in elsewhere]
            if swept:
                self._sweep(swept)
            if not self._records:
                self._modules_before = None
                self._released.clear()
            return len(removed)

    def _held_elsewhere(self, record: PatchRecord) -> bool:
        """Whether something other than the patcher's sites and records may hold the
        replacement (counted before any site is put back; never wrong the other way)."""
        if not self.stable_references or record.references == 0:
            return True
        expected = record.references - self._released.get(id(record.replacement), 0)
        return sys.getrefcount(record.replacement) > expected

    def _sweep(self, removed: list[PatchRecord]) -> None:
        # A replacement still installed under another name (an alias) stays where it is.
        still_used = {id(record.replacement) for record in self._records.values()}
        replacements = {
            id(record.replacement): (record.replacement, unwrap_descriptor(record.original))
            for record in removed
            if id(record.replacement) not in still_used
        }
        if not replacements:
            return
        before = self._modules_before or frozenset()
        new_modules = {name for name in list(sys.modules) if name not in before}
        origins = {record.name.split(".", 1)[0] for record in removed}
        count = sweep_modules(replacements, new_modules, origins)
        if count:
            log.debug("restore put back %d reference(s) bound while patched", count)

    def is_patched(self, qualified_name: str) -> bool:
        """Whether this patcher currently holds a patch of ``qualified_name``."""
        with self._lock:
            return qualified_name in self._records

    def records(self) -> dict[str, PatchRecord]:
        """A copy of the current patch records by name."""
        with self._lock:
            return dict(self._records)

    def __enter__(self) -> Patcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()


def active_patches() -> list[str]:
    """Qualified names patched right now by any live patcher, as ``label:name``."""
    names: list[str] = []
    for patcher in list(_LIVE_PATCHERS):
        names.extend(f"{patcher.label}:{name}" for name in patcher.records())
    return sorted(names)


def original_of(func: object) -> Any:
    """The original behind a replacement installed by a patcher, or ``func`` itself."""
    return getattr(func, ORIGINAL_ATTR, func)


def like_original(wrapper: Callable[..., Any], original: Any) -> Callable[..., Any]:
    """``wrapper`` with the original's name, module and docstring, where it has them (a
    replacement then pickles by name and reads in tracebacks as its original does)."""
    with contextlib.suppress(AttributeError, TypeError):  # exotic callables
        functools.update_wrapper(wrapper, original)
    return wrapper

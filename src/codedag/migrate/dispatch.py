"""One owner of the functions a plan's run-time parts replace, and of the DataLoader fetch.

The prefix cache, the lookup tables and the batched chains each replace library functions and
``_MapDatasetFetcher.fetch`` with code of their own. They never patch anything themselves: each
is a :class:`RuntimePart` that says which functions and hooks it replaces and gives a *layer*
for each (its replacement, calling what it is given as the original). :class:`Dispatch` patches
every name once, through one :class:`codedag.patching.Patcher`, with the layers of every part
that replaces it nested in the order of :data:`ORDER`: the first part's layer is the outermost
(sees a call first), the last's the innermost (calls the library). So a cached prefix hands its
value to a batched chain's step, a table run's producer calls the batched conversion, and the
fetch is the cache's around the tables' around the batched one around torch's, whatever the
plan's sections are.

Applying is all or nothing for the hooks: a hook that cannot be patched undoes everything and
raises. A library function absent in this environment is left out with one warning naming the
sections that wanted it (the others are still applied, as before).
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from codedag.errors import MigrationError
from codedag.migrate.sites import AliasIndex, patch_sites
from codedag.patching import Patcher

log = logging.getLogger(__name__)

FETCH = "torch.utils.data._utils.fetch._MapDatasetFetcher.fetch"
"""Where a DataLoader (or one of its workers) makes a batch from indices."""
ITERABLE_FETCH = "torch.utils.data._utils.fetch._IterableDatasetFetcher.fetch"
"""Where a DataLoader (or one of its workers) makes a batch of an iterable data set."""
NEXT = "torch.utils.data.dataloader._BaseDataLoaderIter.__next__"
"""Where the process that iterates a DataLoader receives a batch."""
ITERATOR = "torch.utils.data.dataloader.DataLoader._get_iterator"
"""Where a DataLoader makes an epoch's iterator (and starts its workers, pickling its data set for
workers that inherit nothing)."""
REACHED_FROM = (ITERATOR, FETCH, ITERABLE_FETCH)
"""The hooks whose first argument's ``dataset`` has its references to the patched functions
rebound at its first call (:meth:`Dispatch._hook_factory`)."""

ORDER = ("workers", "cache", "tables", "batched", "calls")
"""The parts' sections, outermost layer first.

* ``workers`` alone replaces where a DataLoader starts its workers: workers that inherit nothing
  receive the plan (:mod:`codedag.migrate.spawned_workers`);
* ``cache`` first: a hit skips everything below it, and its fetch's retry (a batch that failed
  with cached values runs again without them) covers the other parts' values too;
* ``tables`` next: a run's producer and guards take the values that calls give them;
* ``batched`` next: its fetch makes the samples itself (with deferral), so it must be the one
  that calls torch's;
* ``calls`` innermost: a placed call runs through its backend whatever the others hand it (a
  cache miss computing its prefix, a table run's guard computing its value).
"""


class RuntimePart(Protocol):
    """A run-time part of a plan that replaces functions (see the module docstring)."""

    section: str
    """The plan section it applies (one of :data:`ORDER`)."""

    @property
    def active(self) -> bool:
        """Whether the plan gives it anything to do."""

    def functions(self) -> list[str]:
        """Library functions it replaces (each at every public path of the function)."""

    def hooks(self) -> list[str]:
        """DataLoader hooks it replaces (:data:`FETCH`, :data:`ITERABLE_FETCH`, :data:`NEXT`),
        never rebound elsewhere."""

    def layer(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """Its replacement of ``name``, calling ``original`` (the next layer or the library)."""

    def before_patching(self) -> None:
        """Prepare (open a store, reset counters, build ops) before anything is patched."""

    def after_patching(self, failed: Mapping[str, str]) -> None:
        """Start counting; ``failed``: its functions that could not be patched -> why."""

    def after_restore(self) -> None:
        """Stop counting and release what :meth:`before_patching` took (also after a failed
        apply)."""


def _rank(part: RuntimePart) -> int:
    return ORDER.index(part.section)


class Dispatch:
    """Applies and restores the layers of several parts as one (see the module docstring).

    Args:
        parts: the parts; inactive ones are left out.
        label: the patcher's name (in :func:`codedag.patching.active_patches`).
    """

    def __init__(self, parts: Iterable[RuntimePart], label: str = "plan") -> None:
        self.parts = sorted((p for p in parts if p.active), key=_rank)
        self.patcher = Patcher(label)
        self.failed: dict[str, dict[str, str]] = {}
        self._applied = False
        self._replaced: list[frozenset[str]] | None = None  # each part's names, while applying
        # the data sets whose references are rebound, by id: a weak reference to each (a script
        # may build one every epoch: none is kept alive here), or the data set itself where it
        # takes none. One for every hook: a data set rebound where its loader starts an epoch
        # is not walked again at its first fetch, nor in the workers forked meanwhile
        self._reached: dict[int, Callable[[], object]] = {}

    @property
    def applied(self) -> bool:
        """Whether the layers are installed."""
        return self._applied

    def owners(self, name: str) -> list[RuntimePart]:
        """The parts that replace ``name``, outermost first."""
        replaced = self._replaced if self._replaced is not None else self._names_of_parts()
        return [p for p, names in zip(self.parts, replaced, strict=True) if name in names]

    def _names_of_parts(self) -> list[frozenset[str]]:
        """What each part replaces (its functions and hooks), in the parts' order."""
        return [frozenset(p.functions()) | frozenset(p.hooks()) for p in self.parts]

    def names(self) -> tuple[list[str], list[str]]:
        """Every library function and every hook the parts replace."""
        functions = sorted({f for p in self.parts for f in p.functions()})
        hooks = sorted({h for p in self.parts for h in p.hooks()})
        return functions, hooks

    def apply(self) -> dict[str, dict[str, str]]:
        """Install every layer; returns each section's functions that could not be patched,
        with the reason.

        Raises:
            MigrationError: a hook cannot be patched, or is already patched by something else
                (nothing stays patched).
        """
        if self._applied or not self.parts:
            return {}
        from codedag.backends.registry import default_registry

        registry = default_registry()
        prepared: list[RuntimePart] = []
        failed: dict[str, dict[str, str]] = {p.section: {} for p in self.parts}
        functions, hooks = self.names()
        try:
            for part in self.parts:
                prepared.append(part)
                part.before_patching()
            self._replaced = self._names_of_parts()  # read once: hundreds of names ask
            absent = (MigrationError, ImportError, AttributeError)  # not in this process
            errors: dict[str, BaseException] = {}
            groups = []
            index = AliasIndex()  # the libraries' namespaces, read once for every name
            for name in functions:
                try:
                    sites = patch_sites(name, registry, index)
                    groups.append((name, sites, self._factory(name)))
                except absent as error:
                    errors[name] = error
            errors.update(self.patcher.patch_groups(groups, errors=absent))
            for name in functions:
                if name not in errors:
                    continue
                owners = self.owners(name)
                log.warning(
                    "%s: cannot patch %s: %s",
                    " and ".join(_what(p) for p in owners),
                    name,
                    errors[name],
                )
                for part in owners:
                    failed[part.section][name] = str(errors[name])
            try:
                self.patcher.patch_many(hooks, self._hook_factory, rebind_references=False)
                self._reach_from_hooks(functions, hooks)
            except MigrationError as error:
                sections = [p.section for p in self.parts if p.section != "workers"]
                raise MigrationError(
                    f"cannot apply the plan's {' and '.join(sections)} "
                    "section(s): the DataLoader's batch fetch is already replaced by something "
                    "else (another plan applied in this process? restore it first)"
                ) from error
        except BaseException:
            self.patcher.restore()
            self._replaced = None
            for part in reversed(prepared):
                part.after_restore()
            raise
        for part in self.parts:
            part.after_patching(failed[part.section])
        self.failed = {s: names for s, names in failed.items() if names}
        self._applied = True
        return self.failed

    def _reach_from_hooks(self, functions: list[str], hooks: list[str]) -> None:
        """Hook where a loader starts an epoch and fetches, for the references a data set
        holds, where no part does (placed calls alone); where something else replaced them,
        those references stay unpatched."""
        own = [h for h in REACHED_FROM if functions and h not in hooks]
        try:
            self.patcher.patch_many(own, self._hook_factory, rebind_references=False)
        except MigrationError as error:
            log.info("calls through a data set's own references stay unpatched: %s", error)

    def restore(self) -> int:
        """Remove every layer; returns how many names were put back."""
        if not self._applied:
            return 0
        count = self.patcher.restore()
        for part in reversed(self.parts):
            part.after_restore()
        self._applied = False
        self._replaced = None
        self._reached.clear()  # an apply after this one rebinds anew
        return count

    def patched_names(self) -> list[str]:
        """Every name replaced right now (aliases and hooks included)."""
        return sorted(self.patcher.records()) if self._applied else []

    def _factory(self, name: str) -> Callable[[str, Callable[..., Any]], Callable[..., Any]]:
        owners = self.owners(name)

        def factory(_site: str, original: Callable[..., Any]) -> Callable[..., Any]:
            return compose(owners, name, original)

        return factory

    def _hook_factory(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """The parts' layers of a hook; around those of :data:`REACHED_FROM`, at a data set's
        first call, the references to patched functions the data set and the pipeline's
        modules hold (``functools.partial(cv2.resize, ...)`` in its transforms) pointed at the
        replacements: a module scan at patch time does not reach inside objects, and a
        data set holding an original could not be pickled for spawned workers (a function
        NumPy or cv2 gives no module is pickled by finding it in one, and the patch replaced it
        there)."""
        from codedag.backends.libraries import pipeline_modules

        layered = compose(self.owners(name), name, original)
        if name not in REACHED_FROM:
            return layered
        reached = self._reached
        patcher = self.patcher

        def reaching(owner: Any, *args: Any, **kwargs: Any) -> Any:
            dataset = getattr(owner, "dataset", None)
            known = reached.get(id(dataset)) if dataset is not None else None
            if dataset is not None and (known is None or known() is not dataset):
                reached[id(dataset)] = _reference(dataset)
                patcher.rebind_within((dataset, *pipeline_modules()))
            return layered(owner, *args, **kwargs)

        return reaching


def _reference(obj: object) -> Callable[[], object]:
    """A weak reference to ``obj``, or a function returning it where it takes none."""
    try:
        return weakref.ref(obj)
    except TypeError:
        return lambda: obj


def compose(
    parts: Sequence[RuntimePart], name: str, original: Callable[..., Any]
) -> Callable[..., Any]:
    """``original`` wrapped by each part's layer of ``name``, the first part outermost."""
    replacement = original
    for part in reversed(parts):
        replacement = part.layer(name, replacement)
    return replacement


_WHAT = {
    "workers": "workers started afresh",
    "cache": "prefix cache",
    "tables": "lookup tables",
    "batched": "batched execution",
    "calls": "placement",
}


def _what(part: RuntimePart) -> str:
    return _WHAT.get(part.section, part.section)

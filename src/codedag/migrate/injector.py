"""PatchInjector: installs one UniversalWrapper per planned function through codedag.patching.

Only functions that the plan migrates *and* the registry knows are patched. A plan naming a
NonMigratable function (I/O, decoders, ``os.system``) is refused as a whole with a
:class:`MigrationError`; a name the registry does not know is skipped with a warning. A random
draw (``numpy.random.rand``) the plan places without opting it in runs with its library, with a
warning: a backend draws from another stream, so moving it would change the data. All patches
go through :class:`codedag.patching.Patcher`, which also rebinds references bound at import time
(``from cv2 import resize``) and restores the exact original objects; restored wrappers still
referenced somewhere forward to the original (:meth:`UniversalWrapper.deactivate`).

With ``guard`` settings every wrapper checks its first migrated calls against the original
(:mod:`codedag.migrate.guard`). Forked workers report their counters and guard decisions through
:attr:`PatchInjector.workers` (:mod:`codedag.migrate.workerstats`): :meth:`PatchInjector.stats`
merges them, and each wrapper's ``stats()["guard"]`` lists the workers' decisions.
"""

from __future__ import annotations

import functools
import logging
import sys
import threading
from collections import Counter
from collections.abc import Collection, Mapping
from typing import Any

from codedag.backends.admission import UNKNOWN
from codedag.backends.names import INDEXED_MODULES
from codedag.backends.registry import Registry, draws_random_numbers
from codedag.backends.values import ValueConverter
from codedag.errors import MigrationError
from codedag.migrate import guard as guard_module
from codedag.migrate.guard import GuardSettings
from codedag.migrate.workerstats import COUNT_FIELDS, WorkerStats
from codedag.migrate.wrapper import UniversalWrapper
from codedag.patching import Patcher, resolve
from codedag.plan.context import ContextMatcher, Placement
from codedag.util.text import listing, printable

log = logging.getLogger(__name__)

KEPT_RANDOM = "draws random numbers: runs with its library, since moving it would change the data"
"""Why a random draw the plan places without opting it in is not patched."""


class PatchInjector:
    """Patch the planned functions; restore them.

    Args:
        entries: function -> ``[(context key, placement)]`` with placements already mapped to
            devices that exist in this process (``None``: keep the original).
        registry: the registry deciding what may be patched.
        converters: shared value converters, one per device.
        guard: check each function's first migrated calls against the original and keep the
            placement only if it matches and does not lose time; ``None``: no check.
        opted_in: random draws the user chose to move (the plan's ``placement.only``); any
            other draw the plan places runs with its library.
    """

    def __init__(
        self,
        entries: Mapping[str, list[tuple[str, Placement]]],
        registry: Registry,
        converters: dict[str, ValueConverter],
        guard: GuardSettings | None = None,
        opted_in: Collection[str] = (),
    ) -> None:
        self.entries = entries
        self.registry = registry
        self.converters = converters
        self.guard = guard
        self.opted_in = frozenset(opted_in)
        self.wrappers: dict[str, UniversalWrapper] = {}
        self.workers: WorkerStats | None = None
        """Counters and guard decisions of forked children (created by :meth:`apply_all`)."""
        self.kept_on_cpu: dict[str, str] = {}
        """Placed functions that run with their library all the same -> why (random draws)."""
        self.skipped: dict[str, str] = {}
        self.failed: dict[str, str] = {}
        self._patcher = Patcher("migrate")
        self._current = ""
        self._lock = threading.RLock()

    def check(self) -> list[str]:
        """The functions that would be patched; raises for NonMigratable ones.

        Raises:
            MigrationError: the plan migrates a function that must stay on the CPU.
        """
        refused = []
        wanted = []
        for name, placements in sorted(self.entries.items()):
            if all(p is None for _key, p in placements):
                continue
            reason = self.registry.non_migratable.get(name)
            if reason is not None:
                refused.append(f"{name} ({reason})")
            elif name not in self.opted_in and draws_random_numbers(name, self.registry):
                self.kept_on_cpu[name] = KEPT_RANDOM
            elif self.registry.get(name) is None:
                self.skipped[name] = UNKNOWN
            else:
                wanted.append(name)
        if refused:
            raise MigrationError(
                "the plan migrates functions that must stay on the CPU: "
                + listing([printable(r, 120) for r in refused])
                + "; expected only names from list_supported_functions()"
            )
        if self.skipped:
            names = [printable(n, 80) for n in self.skipped]
            log.warning(
                "skipping %d function(s) %s: %s",
                len(names),
                self.skipped[next(iter(self.skipped))],
                listing(names),
            )
        if self.kept_on_cpu:
            log.warning("%s", random_draws_line(list(self.kept_on_cpu)))
        self.skipped.update(self.kept_on_cpu)
        return wanted

    def apply_all(self) -> dict[str, int]:
        """Patch every planned, known function; returns ``{'patched', 'failed', 'skipped'}``."""
        with self._lock:
            if self._patcher.records():
                return {"patched": 0, "failed": 0, "skipped": 0}
            self.skipped.clear()
            self.failed.clear()
            self.kept_on_cpu.clear()
            wanted = self.check()
            patched = []
            for name in wanted:
                try:
                    sites = patch_sites(name, self.registry)
                except MigrationError as error:
                    self.failed[name] = str(error)
                    log.warning("cannot patch %s: %s", name, error)
                    continue
                self._current = name
                try:
                    self._patcher.patch_many(sites, self._factory)
                except MigrationError as error:
                    self.wrappers.pop(name, None)
                    self.failed[name] = str(error)
                    log.warning("cannot patch %s: %s", name, error)
                    continue
                patched.append(name)
            self._track_workers()
            return {
                "patched": len(patched),
                "failed": len(self.failed),
                "skipped": len(self.skipped),
            }

    def _factory(self, site: str, original: Any) -> Any:
        name = self._current
        existing = self.wrappers.get(name)
        if existing is not None and existing.original is original:
            return existing.function  # an alias of the same function: one wrapper, one count
        spec = self.registry.get(name)
        if spec is None:  # checked before; the registry changed in between
            raise MigrationError(f"{name!r} left the registry while patching")
        matcher = ContextMatcher(name, self.entries[name])
        if matcher.conflicts:
            log.info(
                "%s: %d context(s) are placed differently across traced samples; the runtime "
                "uses each context's majority placement",
                name,
                matcher.conflicts,
            )
        wrapper = UniversalWrapper(spec, original, matcher, self.converters, guard=self.guard)
        self.wrappers[name] = wrapper
        return wrapper.function

    def _track_workers(self) -> None:
        wrappers = dict(self.wrappers)
        workers = WorkerStats(
            sorted(wrappers),
            lambda name: wrappers[name].report(),
            COUNT_FIELDS + guard_module.FIELDS,
            cumulative=COUNT_FIELDS,
            labels=lambda: {name: w.fallback_reasons() for name, w in wrappers.items()},
        )
        for name, wrapper in wrappers.items():
            wrapper.worker_reports = functools.partial(workers.children, name)
        self.workers = workers

    def restore_all(self) -> int:
        """Put back the exact original objects; returns how many functions were restored.

        The wrappers are deactivated: one still referenced where the restore could not reach
        (a tuple, a closure) forwards to the original without counting.
        """
        with self._lock:
            count = self._patcher.restore()
            for wrapper in self.wrappers.values():
                wrapper.deactivate()
            if self.workers is not None:
                self.workers.stop_tracking()
            return count

    def stats(self) -> dict[str, dict[str, Any]]:
        """Each patched function's :meth:`UniversalWrapper.stats`, forked workers' counts added.

        A row's ``in_workers`` holds what forked children counted (already included in its
        totals, their fallbacks' reasons in ``fallback_reasons``); ``guard`` lists the workers'
        guard decisions under ``workers``.
        """
        rows = {}
        for name, wrapper in sorted(self.wrappers.items()):
            row = wrapper.stats()
            if self.workers is not None:
                in_workers = self.workers.totals(name)
                row["in_workers"] = in_workers
                for key, count in in_workers.items():
                    row[key] += count
                reasons = Counter(row["fallback_reasons"])
                reasons.update(self.workers.label_totals(name))
                row["fallback_reasons"] = dict(reasons)
            rows[name] = row
        return rows

    def patched_names(self) -> list[str]:
        """Functions patched right now (canonical names and their aliases)."""
        return sorted(self._patcher.records())


def random_draws_line(names: list[str]) -> str:
    """One line saying the random draws ``names`` run with their library, and why."""
    shown = listing([printable(n, 80) for n in names])
    if len(names) == 1:
        head = f"{shown} draws random numbers: it runs with its library, since moving it"
    else:
        head = f"{len(names)} random draws run with their library ({shown}), since moving them"
    return (
        f"{head} would change the data (a backend draws from another stream); name a draw in "
        "the plan's placement.only (codedag optimize --only) to move it anyway"
    )


def patch_sites(name: str, registry: Any) -> list[str]:
    """``name`` and every other public path of the same function: what patching it means.

    Raises:
        MigrationError: ``name`` does not resolve.
    """
    _owner, _attr, raw = resolve(name)
    return [name, *alias_paths(name, raw, registry.aliases(name))]


def patch_each(
    patcher: Patcher,
    names: list[str],
    factory: Any,
    current: list[str],
    what: str,
    registry: Any,
) -> int:
    """Patch every public path of each of ``names`` with ``factory``; ``current`` holds the name
    being patched (the factory reads it). A function absent in this environment is one warning
    naming ``what`` patches it; returns how many could not be patched."""
    failed = 0
    for name in names:
        try:
            current[:] = [name]
            patcher.patch_many(patch_sites(name, registry), factory)
        except Exception as error:  # a function absent in this environment
            failed += 1
            log.warning("%s: cannot patch %s: %s", what, name, error)
    current.clear()
    return failed


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

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
import threading
from collections import Counter
from collections.abc import Callable, Collection, Mapping
from typing import Any

from codedag.backends.admission import UNKNOWN
from codedag.backends.device_values import ValueConverter
from codedag.backends.placement_blockers import draws_random_numbers
from codedag.backends.registry import Registry
from codedag.errors import MigrationError
from codedag.migrate import guard as guard_module
from codedag.migrate.guard import GuardSettings
from codedag.migrate.patched_runtime import PatchedRuntime
from codedag.migrate.workerstats import COUNT_FIELDS, WorkerStats
from codedag.migrate.wrapper import UniversalWrapper
from codedag.plan.context import ContextMatcher, Placement
from codedag.util.text import listing, printable

log = logging.getLogger(__name__)

KEPT_RANDOM = "draws random numbers: runs with its library, since moving it would change the data"
"""Why a random draw the plan places without opting it in is not patched."""


class PatchInjector(PatchedRuntime):
    """Patch the planned functions; restore them (the plan's ``calls`` section).

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
        super().__init__()
        self.entries = entries
        self.registry = registry
        self.converters = converters
        self.guard = guard
        self.opted_in = frozenset(opted_in)
        self.wrappers: dict[str, UniversalWrapper] = {}
        self.workers: WorkerStats | None = None
        """Counters and guard decisions of forked children (created by :meth:`apply_all`)."""
        self.afresh_counts: Callable[[], Mapping[str, Mapping[str, int]]] = dict
        """What workers started afresh counted, per function (set by the migrator)."""
        self.kept_on_cpu: dict[str, str] = {}
        """Placed functions that run with their library all the same -> why (random draws)."""
        self.skipped: dict[str, str] = {}
        self._wanted: list[str] | None = None
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
            reason = self.registry.refusal(name)
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
        self._wanted = wanted
        return wanted

    # -- the calls section as a part of the plan's dispatch -----------------------------------
    section = "calls"

    @property
    def active(self) -> bool:
        """Whether any planned function is to be patched (after :meth:`check`)."""
        return bool(self._wanted_names())

    def _wanted_names(self) -> list[str]:
        if self._wanted is None:
            self.skipped.clear()
            self.kept_on_cpu.clear()
            self.check()
        return self._wanted or []

    def functions(self) -> list[str]:
        """The planned functions the registry knows (:meth:`check`)."""
        return list(self._wanted_names())

    def hooks(self) -> list[str]:
        """None: placed calls are matched where they are made."""
        return []

    def after_patching(self, failed: Mapping[str, str]) -> None:
        """Forget the wrappers of functions that could not be patched; count the workers."""
        for name in failed:
            self.wrappers.pop(name, None)
        self.failed = dict(failed)
        self._track_workers()
        self._applied = True

    def after_restore(self) -> None:
        """Deactivate the wrappers: one still referenced where the restore could not reach (a
        tuple, a closure) forwards to the original without counting."""
        for wrapper in self.wrappers.values():
            wrapper.deactivate()
        super().after_restore()

    def counts(self) -> dict[str, int]:
        """``{'patched', 'failed', 'skipped'}`` function counts."""
        failed = len(self.failed)
        wanted = len(self._wanted or [])
        return {"patched": wanted - failed, "failed": failed, "skipped": len(self.skipped)}

    def apply_all(self) -> dict[str, int]:
        """Patch every planned, known function alone; returns ``{'patched', 'failed',
        'skipped'}`` (zeros when already applied)."""
        with self._lock:
            if self._applied:
                return {"patched": 0, "failed": 0, "skipped": 0}
            self._wanted = None
            self.apply()
            return self.counts()

    def restore_all(self) -> int:
        """Undo :meth:`apply_all`; returns how many names were put back."""
        with self._lock:
            return self.restore()

    def layer(self, name: str, original: Any) -> Any:
        """The :class:`UniversalWrapper` of ``name`` around ``original`` (one per function:
        its aliases share it)."""
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

    def call_counts(self) -> dict[str, dict[str, int]]:
        """Each patched function's counters in this process (:data:`COUNT_FIELDS`)."""
        return {name: wrapper.counts() for name, wrapper in self.wrappers.items()}

    def stats(self) -> dict[str, dict[str, Any]]:
        """Each patched function's :meth:`UniversalWrapper.stats`, forked workers' counts added.

        A row's ``in_workers`` holds what workers counted, forked or started afresh (already
        included in its totals; forked children's fallbacks' reasons in ``fallback_reasons``);
        ``guard`` lists the forked workers' guard decisions under ``workers``.
        """
        rows = {}
        afresh = self.afresh_counts()
        for name, wrapper in sorted(self.wrappers.items()):
            row = wrapper.stats()
            if self.workers is not None or name in afresh:
                in_workers = Counter(self.workers.totals(name) if self.workers is not None else {})
                in_workers.update(afresh.get(name, {}))
                row["in_workers"] = dict(in_workers)
                for key, count in in_workers.items():
                    row[key] += count
            if self.workers is not None:
                reasons = Counter(row["fallback_reasons"])
                reasons.update(self.workers.label_totals(name))
                row["fallback_reasons"] = dict(reasons)
            rows[name] = row
        return rows


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

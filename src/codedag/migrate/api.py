"""PipelineMigrator: apply a migration plan to the running process.

Example:
    >>> migrator = PipelineMigrator.from_json("migration_plan.json")  # doctest: +SKIP
    >>> with migrator:  # doctest: +SKIP
    ...     for batch in dataloader:
    ...         ...
    >>> migrator.get_stats()["totals"]  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
import os
import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from codedag.backends.admission import Admission, admit_plan
from codedag.backends.device_values import ValueConverter
from codedag.backends.registry import Registry, default_registry
from codedag.devices.torch_devices import default_device as _default_device
from codedag.devices.torch_devices import device_for_rank, resolve_device
from codedag.devices.workers import install_fork_hook
from codedag.migrate.batched.inactive import NoBatchedChains
from codedag.migrate.batched.settings import BatchedSettings
from codedag.migrate.dispatch import Dispatch
from codedag.migrate.guard import GuardSettings
from codedag.migrate.injector import PatchInjector
from codedag.migrate.loader_settings import LoaderSettingsPatch
from codedag.migrate.placements import PlanView, load_plan_file, parse_plan
from codedag.migrate.spawned_workers import SpawnedWorkers, WorkerPlan
from codedag.migrate.stats import CallTotals, GuardSummary, MigrationStats, Off, ValueCacheCounts
from codedag.migrate.wrapper import _install_fork_hook as install_wrapper_fork_hook
from codedag.plan import MigrationPlan
from codedag.plan.context import Placement
from codedag.util.text import listing, printable

if TYPE_CHECKING:
    from codedag.migrate.batched.runtime import BatchedRuntime
    from codedag.migrate.cache.runtime import CacheSettings, PrefixCacheRuntime
    from codedag.migrate.tables.runtime import TablesRuntime

log = logging.getLogger(__name__)


class PipelineMigrator:
    """Runs the calls a plan places on a device through torch backends, transparently.

    Args:
        plan: a migration plan: the model (what ``OptimizerManager`` builds, used as it is) or
            its dict form (:meth:`codedag.plan.model.MigrationPlan.to_dict`, validated here).
        default_device: where calls go whose plan device does not exist here; default
            ``cuda:LOCAL_RANK`` under torchrun, ``cuda:0`` with CUDA, else ``cpu``.
        registry: the registry of migratable functions (default: the process-wide one).
        guard: the run-time check of the plan (default on): the first calls of each placed
            function run both ways, and a placement whose backend loses time or differs from
            the library is switched off, with the reason in :meth:`get_stats` and the log.
            ``True`` uses :class:`GuardSettings` defaults, settings customize it, ``False`` or
            ``None`` switch it off.
        deliver: batched chains (the plan's ``batched`` section, docs/batched.md) deliver
            their batches on the host (``"host"``, what ``default_collate`` would produce),
            leave them on the device (``"device"``), or learn it from the training loop
            (``"auto"``, the default: on the device once the loop moves a batch there).
        verify: batches (the first ones) that batched chains also run through the CPU
            per-sample reference, compared through the tolerance table.
        batched: all the settings of batched execution (overrides ``deliver`` and ``verify``).
        cache: the prefix cache of the plan's ``cache`` section (docs/cache.md): ``True``
            (default) applies it with the plan's folder and budget, settings customize it
            (verification, folder, budgets), ``False`` or ``None`` switch it off.
        tables: the plan's ``tables`` section (docs/tables.md): element-wise runs on uint8
            arrays gathered through lookup tables where they match the calls bit for bit and
            are faster; ``False`` switches it off.

    Every function the plan names, in any section, is looked up in the registry before anything
    is imported (:mod:`codedag.backends.admission`): names it does not know stay unpatched (a
    batched chain naming one runs per sample), and names that must stay on the CPU make
    :meth:`apply` refuse the plan.

    Raises:
        SchemaError: the plan is malformed (one error listing every problem).
    """

    def __init__(
        self,
        plan: Mapping[str, Any] | MigrationPlan,
        default_device: str | None = None,
        registry: Registry | None = None,
        guard: GuardSettings | bool | None = True,
        *,
        deliver: str = "auto",
        verify: int = 1,
        batched: BatchedSettings | None = None,
        cache: CacheSettings | bool | None = True,
        tables: bool = True,
    ) -> None:
        self.plan: PlanView = parse_plan(plan)
        self.guard: GuardSettings | None = GuardSettings() if guard is True else (guard or None)
        self.default_device = default_device or _default_device()
        self.registry = registry if registry is not None else default_registry()
        assert self.plan.plan is not None
        self.admission: Admission = admit_plan(self.plan.plan, self.registry)
        self.device_map: dict[str, str] = {}
        for device in sorted(self.plan.devices):
            used, warning = resolve_device(device_for_rank(device), self.default_device)
            if warning:
                log.warning(warning)
            self.device_map[device] = used
        self._converters: dict[str, ValueConverter] = {}
        self._batched_settings = batched or BatchedSettings(deliver=deliver, verify=verify)
        self._batched = _batched_runtime(
            self.plan, self._batched_settings, self.default_device, self.admission
        )
        self._cache = _cache_runtime(self.plan, cache)
        self._tables = _tables_runtime(self.plan, tables)
        self._workers = SpawnedWorkers(self._worker_plan, self._workers_have_work)
        self._cache.afresh_counts = self._workers.cache_counts
        self._tables.afresh_counts = self._workers.tables_counts
        self._dispatch = Dispatch([])
        self._injector: PatchInjector | None = None
        self._lock = threading.RLock()
        self._applied = False
        self._loader = LoaderSettingsPatch.from_plan(self.plan.plan)  # the plan's loader section
        if self._loader is not None and self._cache.active:
            self._loader.watch_cache(self._cache.progress)  # warm settings need the cache

    @classmethod
    def from_plan(
        cls,
        plan: Mapping[str, Any] | MigrationPlan,
        default_device: str | None = None,
        registry: Registry | None = None,
        guard: GuardSettings | bool | None = True,
        **batched: Any,
    ) -> PipelineMigrator:
        """Build from a plan (the model, or the dict ``OptimizerManager`` returns as
        ``result['migration_plan']``); ``batched``: the ``deliver``/``verify``/``batched``
        arguments of the constructor."""
        return cls(plan, default_device=default_device, registry=registry, guard=guard, **batched)

    @classmethod
    def from_json(
        cls,
        path: str | os.PathLike[str],
        default_device: str | None = None,
        registry: Registry | None = None,
        guard: GuardSettings | bool | None = True,
        **batched: Any,
    ) -> PipelineMigrator:
        """Build from a ``migration_plan.json`` file (``batched``: as :meth:`from_plan`)."""
        return cls(
            load_plan_file(path),
            default_device=default_device,
            registry=registry,
            guard=guard,
            **batched,
        )

    def _entries(self) -> dict[str, list[tuple[str, Placement]]]:
        batched = set(self._batched.chains.functions) if self._batched.active else set()
        return {
            name: [(key, None if p is None else self.device_map[p]) for key, p in placements]
            for name, placements in self.plan.entries.items()
            if name not in batched  # a chain's functions record deferred values instead
        }

    def apply(self) -> dict[str, int]:
        """Patch the planned functions; returns ``{'patched', 'failed', 'skipped'}`` counts.

        A second call while applied patches nothing and returns zeros.

        Every function replaced is counted: the placed calls' and the batched chains'.

        Raises:
            MigrationError: the plan migrates a NonMigratable function, in any section (nothing
                is patched).
        """
        with self._lock:
            if self._applied:
                return {"patched": 0, "failed": 0, "skipped": 0}
            self.admission.check()
            install_fork_hook()
            # A forked child must replace the wrappers' locks before the worker counters read
            # them: their hooks run in registration order, so the wrappers' goes first even when
            # no wrapper exists yet (an empty plan's injector still creates worker counters).
            install_wrapper_fork_hook()
            model = self.plan.plan
            injector = PatchInjector(
                self._entries(),
                self.registry,
                self._converters,
                guard=self.guard,
                opted_in=model.placement.only if model is not None else (),
            )
            injector.check()  # refuses a plan placing what must stay on the CPU
            parts = [self._workers, self._cache, self._tables, self._batched, injector]
            dispatch = Dispatch(parts)
            try:
                if self._loader is not None:
                    self._loader.apply()
                dispatch.apply()
            except BaseException:
                if self._loader is not None:
                    self._loader.restore()  # nothing stays patched when apply fails half-way
                raise
            injector.afresh_counts = self._workers.call_counts
            self._injector, self._dispatch = injector, dispatch
            self._applied = True
            counts = injector.counts()
            if self._batched.active:
                chains = self._batched.counts()
                counts["patched"] += chains["patched"]
                counts["failed"] += chains["failed"]
            log.info(
                "migration applied: %d patched, %d failed, %d skipped",
                counts["patched"],
                counts["failed"],
                counts["skipped"],
            )
            return counts

    def worker_plan(self) -> WorkerPlan | None:
        """What DataLoader workers started with 'spawn' or 'forkserver' receive while the plan
        is applied (None: nothing, the plan gives them nothing or cannot be sent)."""
        return self._workers.shipped() if self._applied else None

    def running_worker_plan(self) -> WorkerPlan | None:
        """What DataLoader workers started before the plan was applied receive (however they
        were started: :mod:`codedag.migrate.plan_mailbox`); None as for :meth:`worker_plan`.
        Their batched chains run per sample, while this process keeps batching for the
        workers it forks later."""
        if not self._applied:
            return None
        return self._workers.travelling(self._worker_plan(stop_batched=False))

    def _workers_have_work(self) -> bool:
        """Whether any section of the plan runs in DataLoader workers."""
        parts = (self._cache.active, self._tables.active, self._batched.active)
        return any(parts) or bool(self._entries())

    def _worker_plan(self, stop_batched: bool = True) -> WorkerPlan | None:
        """What a DataLoader worker that inherits nothing applies (None: the plan gives
        workers nothing to do). Asked once per application, when a loader first starts such
        workers, which also stops batched execution (``stop_batched``): those workers defer
        nothing."""
        if not self._workers_have_work() or self.plan.plan is None:
            return None
        if self.registry is not default_registry():
            log.warning(
                "codedag: DataLoader workers started with 'spawn' or 'forkserver' run the "
                "libraries' own functions: a migrator with a registry of its own cannot send "
                "it to them"
            )
            return None
        if stop_batched and self._batched.active:
            self._batched.stop(
                "a DataLoader starts its workers with 'spawn' or 'forkserver': they share no "
                "switch with this process, so batched chains run per sample"
            )
        return WorkerPlan(
            plan=self.plan.plan.model_copy(update={"loader": None}),
            default_device=self.default_device,
            guard=self.guard,
            batched=self._batched_settings,
            cache=dataclasses.replace(self._cache.settings, run=self._cache.run),
            tables=self._tables.active,
            migrator_type=type(self),
            saved_ns_per_sample=(  # 0: a plan that measured nothing
                self.plan.plan.cache.saved_ns_per_sample or None
                if self._cache.active and self.plan.plan.cache is not None
                else None
            ),
        )

    def restore(self) -> int:
        """Put back every original function; returns how many were restored."""
        with self._lock:
            if not self._applied or self._injector is None:
                return 0
            count = self._dispatch.restore()
            if self._loader is not None:
                self._loader.restore()
            self._applied = False
            return count

    def is_applied(self) -> bool:
        """Whether the plan's patches are installed."""
        return self._applied

    def patched_functions(self) -> list[str]:
        """Every function replaced right now (placed calls, batched chains and the DataLoader
        hooks), by the names it was patched under."""
        if not (self._injector and self._applied):
            return []
        return self._dispatch.patched_names()

    def get_stats(self) -> MigrationStats:
        """What the run did so far, in every process (see :class:`MigrationStats`; it reads as
        its dict form too: ``get_stats()["cache"]["hits"]``). The figures survive
        :meth:`restore`."""
        injector = self._injector
        functions = injector.stats() if injector is not None else {}
        totals = CallTotals(
            **{
                key: sum(f[key] for f in functions.values())
                for key in ("migrated", "fell_back", "passed_through", "nested")
            }
        )
        return MigrationStats(
            functions=functions,
            totals=totals,
            skipped=dict(injector.skipped) if injector else {},
            failed=dict(injector.failed) if injector else {},
            device_map=dict(self.device_map),
            value_cache=ValueCacheCounts(
                hits=sum(c.cache.hits for c in self._converters.values()),
                stale=sum(c.cache.stale for c in self._converters.values()),
            ),
            applied=self._applied,
            guard=self._guard_summary(functions),
            loader=None if self._loader is None else self._loader.stats(),
            batched=Off()
            if isinstance(self._batched, NoBatchedChains) or not self._batched.active
            else self._batched.stats(),
            cache=self._cache.stats() if self._cache.active else Off(),
            tables=self._tables.stats() if self._tables.active else Off(),
        )

    def _guard_summary(self, functions: Mapping[str, Any]) -> GuardSummary | Off:
        """Which placements the run-time check kept or switched off, and why."""
        if self.guard is None:
            return Off()
        kept, switched_off = [], {}
        for name, row in functions.items():
            guard = row.get("guard") or {}
            if guard.get("state") == "kept":
                kept.append(name)
            elif guard.get("state") == "switched_off":
                switched_off[name] = guard.get("reason", "")
            for worker in guard.get("workers") or []:
                if isinstance(worker, Mapping) and worker.get("state") == "switched_off":
                    switched_off.setdefault(name, worker.get("reason", ""))
        return GuardSummary(
            calls=self.guard.calls,
            margin=self.guard.margin,
            kept=sorted(kept),
            switched_off=switched_off,
            kept_on_cpu=dict(self._injector.kept_on_cpu) if self._injector is not None else {},
        )

    @property
    def batched(self) -> BatchedRuntime | NoBatchedChains:
        """The batched execution of the plan's chains (inactive when it places none)."""
        return self._batched

    def call_counts(self) -> dict[str, dict[str, int]]:
        """This process's counters of each placed function (a worker started afresh reports
        them to the process that started it); empty before :meth:`apply`."""
        return self._injector.call_counts() if self._injector is not None else {}

    @property
    def tables(self) -> TablesRuntime:
        """The lookup tables of the plan's ``tables`` section (inactive when it names none)."""
        return self._tables

    @property
    def cache(self) -> PrefixCacheRuntime:
        """The prefix cache of the plan's ``cache`` section (inactive when it caches nothing)."""
        return self._cache

    def __enter__(self) -> PipelineMigrator:
        with self._lock:
            if not self._applied:
                self.apply()
        return self

    def __exit__(self, *exc: object) -> None:
        self.restore()

    def __repr__(self) -> str:
        state = "applied" if self._applied else "not applied"
        return f"PipelineMigrator({len(self.plan.migrated_functions)} functions, {state})"


def _batched_runtime(
    plan: PlanView, settings: BatchedSettings, default: str, admission: Admission
) -> BatchedRuntime | NoBatchedChains:
    """The runtime of the plan's batched chains, on the device they run on here; a chain
    naming a function the registry does not admit is dropped (it runs per sample). Without a
    chain, an inactive part (batched execution's modules are not imported)."""
    from codedag.migrate.batched.settings import chains_from_plan

    model = plan.plan
    chains = chains_from_plan(model.batched if model is not None else None)
    dropped = chains.keep_only(admission.allows)
    if dropped:
        shown = [
            f"{printable(c, 40)} ({listing([printable(n, 80) for n in names], 3)})"
            for c, names in dropped.items()
        ]
        log.warning(
            "%d batched chain(s) name functions without a backend in the registry and run per "
            "sample: %s",
            len(dropped),
            listing(shown, 5),
        )
    if not chains.chains:
        return NoBatchedChains(chains)
    from codedag.migrate.batched.runtime import BatchedRuntime

    device, warning = resolve_device(device_for_rank(chains.device or default), default)
    if warning:
        log.warning(warning)
    others: dict[str, list[str]] = {}
    for call in model.calls if model is not None else []:
        if call.function in chains.entry_functions:
            others.setdefault(call.function, []).extend(call.context_keys)
    return BatchedRuntime(chains, device, settings, others)


def _tables_runtime(plan: PlanView, enabled: bool) -> TablesRuntime:
    """The runs of the plan's ``tables`` section (none when switched off)."""
    from codedag.migrate.tables.runtime import RunSpec, TablesRuntime

    section = plan.plan.tables if plan.plan is not None else None
    if not enabled or section is None:
        return TablesRuntime([])
    runs = [RunSpec(r.producer, tuple(r.callers)) for r in section.planned]
    return TablesRuntime(runs, section.guards if runs else [])


def _cache_runtime(plan: PlanView, cache: CacheSettings | bool | None) -> PrefixCacheRuntime:
    """The prefix cache of the plan's ``cache`` section, with the plan's folder, budget and
    first-epoch storing share where the settings name none."""
    from codedag.migrate.cache.runtime import CacheSettings, PrefixCacheRuntime, chains_from_plan
    from codedag.store.confine import plan_cache_folder

    section = plan.plan.cache if plan.plan is not None else None
    if cache is None or cache is False or section is None:
        return PrefixCacheRuntime([], CacheSettings(enabled=False))
    settings = CacheSettings() if cache is True else cache
    store = settings.store
    if store.folder is None and section.folder:
        store = dataclasses.replace(store, folder=plan_cache_folder(section.folder))
    if store.ram_budget_bytes is None and section.budget_bytes:
        store = dataclasses.replace(store, ram_budget_bytes=section.budget_bytes)
    share = section.store_share if settings.store_share is None else settings.store_share
    settings = dataclasses.replace(settings, store=store, store_share=share)
    return PrefixCacheRuntime(chains_from_plan(section), settings)

"""PipelineMigrator: apply a migration plan to the running process (seed 001 §4).

Example:
    >>> migrator = PipelineMigrator.from_json("migration_plan.json")  # doctest: +SKIP
    >>> with migrator:  # doctest: +SKIP
    ...     for batch in dataloader:
    ...         ...
    >>> migrator.get_stats()["totals"]  # doctest: +SKIP
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from codedag.migrate.context import Placement
from codedag.migrate.devices import default_device as _default_device
from codedag.migrate.devices import device_for_rank, install_fork_hook, resolve_device
from codedag.migrate.guard import GuardSettings
from codedag.migrate.injector import PatchInjector
from codedag.migrate.loader_settings import LoaderSettingsPatch
from codedag.migrate.plan import PlanView, load_plan_file, parse_plan
from codedag.migrate.registry import Registry, default_registry
from codedag.migrate.values import ValueConverter

log = logging.getLogger(__name__)


class PipelineMigrator:
    """Runs the calls a plan places on a device through torch backends, transparently.

    Args:
        plan: a migration plan dict (CONTRACT.md).
        default_device: where calls go whose plan device does not exist here; default
            ``cuda:LOCAL_RANK`` under torchrun, ``cuda:0`` with CUDA, else ``cpu``.
        registry: the registry of migratable functions (default: the process-wide one).
        guard: the run-time check of the plan (default on): the first calls of each placed
            function run both ways, and a placement whose backend loses time or differs from
            the library is switched off, with the reason in :meth:`get_stats` and the log.
            ``True`` uses :class:`GuardSettings` defaults, settings customize it, ``False`` or
            ``None`` switch it off.

    Raises:
        SchemaError: the plan is malformed (one error listing every problem).
    """

    def __init__(
        self,
        plan: Mapping[str, Any],
        default_device: str | None = None,
        registry: Registry | None = None,
        guard: GuardSettings | bool | None = True,
    ) -> None:
        self.plan: PlanView = parse_plan(plan)
        self.guard: GuardSettings | None = GuardSettings() if guard is True else (guard or None)
        self.default_device = default_device or _default_device()
        self.registry = registry if registry is not None else default_registry()
        self.device_map: dict[str, str] = {}
        for device in sorted(self.plan.devices):
            used, warning = resolve_device(device_for_rank(device), self.default_device)
            if warning:
                log.warning(warning)
            self.device_map[device] = used
        self._converters: dict[str, ValueConverter] = {}
        self._injector: PatchInjector | None = None
        self._lock = threading.RLock()
        self._applied = False
        self._loader = LoaderSettingsPatch.from_plan(self.plan.plan)  # the plan's loader section

    @classmethod
    def from_plan(
        cls,
        plan: Mapping[str, Any],
        default_device: str | None = None,
        registry: Registry | None = None,
        guard: GuardSettings | bool | None = True,
    ) -> PipelineMigrator:
        """Build from a plan dict (what ``OptimizerManager`` returns)."""
        if hasattr(plan, "to_dict"):
            plan = plan.to_dict()  # a plan object of the optimizer
        return cls(plan, default_device=default_device, registry=registry, guard=guard)

    @classmethod
    def from_json(
        cls,
        path: str | os.PathLike[str],
        default_device: str | None = None,
        registry: Registry | None = None,
        guard: GuardSettings | bool | None = True,
    ) -> PipelineMigrator:
        """Build from a ``migration_plan.json`` file."""
        return cls(
            load_plan_file(path), default_device=default_device, registry=registry, guard=guard
        )

    def _entries(self) -> dict[str, list[tuple[str, Placement]]]:
        return {
            name: [(key, None if p is None else self.device_map[p]) for key, p in placements]
            for name, placements in self.plan.entries.items()
        }

    def apply(self) -> dict[str, int]:
        """Patch the planned functions; returns ``{'patched', 'failed', 'skipped'}`` counts.

        A second call while applied patches nothing and returns zeros.

        Raises:
            MigrationError: the plan migrates a NonMigratable function (nothing is patched).
        """
        with self._lock:
            if self._applied:
                return {"patched": 0, "failed": 0, "skipped": 0}
            install_fork_hook()
            injector = PatchInjector(
                self._entries(), self.registry, self._converters, guard=self.guard
            )
            try:
                counts = injector.apply_all()
                if self._loader is not None:
                    self._loader.apply()
            except BaseException:
                injector.restore_all()  # nothing stays patched when apply fails half-way
                raise
            self._injector = injector
            self._applied = True
            log.info(
                "migration applied: %d patched, %d failed, %d skipped",
                counts["patched"],
                counts["failed"],
                counts["skipped"],
            )
            return counts

    def restore(self) -> int:
        """Put back every original function; returns how many were restored."""
        with self._lock:
            if not self._applied or self._injector is None:
                return 0
            count = self._injector.restore_all()
            if self._loader is not None:
                self._loader.restore()
            self._applied = False
            return count

    def is_applied(self) -> bool:
        """Whether the plan's patches are installed."""
        return self._applied

    def patched_functions(self) -> list[str]:
        """Canonical names patched right now."""
        return self._injector.patched_names() if self._injector and self._applied else []

    def get_stats(self) -> dict[str, Any]:
        """Per-function counters and totals (they survive :meth:`restore`).

        Returns:
            ``{"functions": {name: {"migrated", "fell_back", "passed_through", "nested",
            "fallback_reasons", "match_levels", "devices", "strategy", "in_workers", "guard"}},
            "totals": {...},
            "skipped": {name: reason}, "failed": {name: reason}, "device_map": {plan: used},
            "value_cache": {"hits", "stale"}, "applied": bool,
            "loader": DataLoader settings applied (``LoaderSettingsPatch.stats``) or None}``.
        """
        injector = self._injector
        functions = injector.stats() if injector is not None else {}
        totals = {
            key: sum(f[key] for f in functions.values())
            for key in ("migrated", "fell_back", "passed_through", "nested")
        }
        return {
            "functions": functions,
            "totals": totals,
            "skipped": dict(injector.skipped) if injector else {},
            "failed": dict(injector.failed) if injector else {},
            "device_map": dict(self.device_map),
            "value_cache": {
                "hits": sum(c.cache.hits for c in self._converters.values()),
                "stale": sum(c.cache.stale for c in self._converters.values()),
            },
            "applied": self._applied,
            "guard": self._guard_summary(functions),
            "loader": None if self._loader is None else self._loader.stats(),
        }

    def _guard_summary(self, functions: Mapping[str, Any]) -> dict[str, Any]:
        """Which placements the run-time check kept or switched off, and why."""
        if self.guard is None:
            return {"enabled": False}
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
        return {
            "enabled": True,
            "calls": self.guard.calls,
            "margin": self.guard.margin,
            "kept": sorted(kept),
            "switched_off": switched_off,
        }

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

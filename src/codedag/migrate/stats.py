"""What a migrated run did: :meth:`~codedag.migrate.api.PipelineMigrator.get_stats` as one model.

:class:`MigrationStats` is read as attributes (``stats.totals.migrated``) or as the dict it dumps
to (``stats["totals"]["migrated"]``), so code written against the dict keeps working;
``model_dump(mode="json")`` is that dict, for files. The run-time parts' own figures
(``batched``, ``cache``, ``tables``, ``loader``) are their runtimes' ``stats()``, documented there
and in docs/batched.md, docs/cache.md, docs/tables.md and docs/loader-tuning.md.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field


class StatsModel(BaseModel):
    """A model that reads like the dict it dumps to."""

    model_config = ConfigDict(extra="forbid")

    def __getitem__(self, key: str) -> Any:
        if key not in type(self).model_fields:
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        """The field ``key``, or ``default`` where the model has none."""
        return getattr(self, key) if key in type(self).model_fields else default

    def __contains__(self, key: object) -> bool:
        return key in type(self).model_fields

    def keys(self) -> list[str]:
        """The field names, as a dict's keys."""
        return list(type(self).model_fields)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Mapping):
            return self.model_dump() == dict(other)
        return super().__eq__(other)

    __hash__ = None  # type: ignore[assignment]


class CallTotals(StatsModel):
    """Calls of every placed function, summed (forked workers' included).

    Attributes:
        migrated: calls that ran through their backend.
        fell_back: calls that ran with their library after the backend refused or failed.
        passed_through: calls the plan does not place (another context, or switched off).
        nested: calls made from inside another migrated call (they run as written).
    """

    migrated: int = 0
    fell_back: int = 0
    passed_through: int = 0
    nested: int = 0


class ValueCacheCounts(StatsModel):
    """The device values reused between consecutive migrated calls.

    Attributes:
        hits: arguments found on the device already.
        stale: cached values dropped because their array changed.
    """

    hits: int = 0
    stale: int = 0


class Off(StatsModel):
    """A part of the run that the plan or the caller switched off."""

    enabled: Literal[False] = False


class GuardSummary(StatsModel):
    """Which placements the run-time check kept or switched off, and why.

    Attributes:
        enabled: always true (a check switched off is :class:`Off`).
        calls: first calls of each placed function compared both ways.
        margin: how much slower the backend may be before its placement is switched off.
        kept: functions whose placement passed the check.
        switched_off: function -> why its placement was switched off (in any process).
        kept_on_cpu: function -> why a placed function runs with its library all the same (a
            random draw: moving it would change the data).
    """

    enabled: Literal[True] = True
    calls: int
    margin: float
    kept: list[str] = Field(default_factory=list)
    switched_off: dict[str, str] = Field(default_factory=dict)
    kept_on_cpu: dict[str, str] = Field(default_factory=dict)


class MigrationStats(StatsModel):
    """Everything :meth:`~codedag.migrate.api.PipelineMigrator.get_stats` reports (its figures
    survive ``restore()``).

    Attributes:
        functions: each placed function's counters: ``migrated``, ``fell_back``,
            ``passed_through``, ``nested``, ``fallback_reasons``, ``match_levels``, ``devices``,
            ``strategy``, ``given_up_call_sites``, ``in_workers`` (what forked workers counted,
            included in the totals) and its ``guard`` decisions.
        totals: those counters summed over the functions.
        skipped: placed functions not patched -> why (unknown to the registry, random draws).
        failed: functions that could not be patched here -> why.
        device_map: each device the plan names -> the device used in this process.
        value_cache: device values reused between consecutive calls.
        applied: whether the plan is applied right now.
        guard: the run-time check's decisions, or :class:`Off`.
        loader: the DataLoader settings applied and kept (``LoaderSettingsPatch.stats``), or
            None without a ``loader`` section.
        batched: batched execution's figures (``BatchedRuntime.stats``), or ``{"enabled":
            False}``.
        cache: the prefix cache's figures (``PrefixCacheRuntime.stats``), or ``{"enabled":
            False}``.
        tables: the lookup tables' figures (``TablesRuntime.stats``), or ``{"enabled": False}``.
    """

    functions: dict[str, dict[str, Any]] = Field(default_factory=dict)
    totals: CallTotals = Field(default_factory=CallTotals)
    skipped: dict[str, str] = Field(default_factory=dict)
    failed: dict[str, str] = Field(default_factory=dict)
    device_map: dict[str, str] = Field(default_factory=dict)
    value_cache: ValueCacheCounts = Field(default_factory=ValueCacheCounts)
    applied: bool = False
    guard: GuardSummary | Off = Field(default_factory=Off)
    loader: dict[str, Any] | None = None
    batched: dict[str, Any] = Field(default_factory=lambda: {"enabled": False})
    cache: dict[str, Any] = Field(default_factory=lambda: {"enabled": False})
    tables: dict[str, Any] = Field(default_factory=lambda: {"enabled": False})

"""What a migrated run did: :meth:`~codedag.migrate.api.PipelineMigrator.get_stats` as one model.

:class:`MigrationStats` is read as attributes (``stats.totals.migrated``) or as the dict it dumps
to (``stats["totals"]["migrated"]``), so code written against the dict keeps working;
``model_dump(mode="json")`` is that dict, for files. The run-time parts' own figures are models
too, one per runtime's ``stats()``: :class:`BatchedStats`, :class:`CacheStats`,
:class:`TablesStats` and :class:`LoaderStats` (docs/batched.md, docs/cache.md, docs/tables.md and
docs/loader-tuning.md); each dumps to the keys its dict had, so saved files validate into them.
A figure is documented by the docstring under its field (pydantic is not asked to read them:
reading them at import cost every migrated run about 12 ms).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
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

    def values(self) -> list[Any]:
        """The fields' values, as a dict's values."""
        return [getattr(self, key) for key in type(self).model_fields]

    def items(self) -> list[tuple[str, Any]]:
        """The fields' names and values, as a dict's items."""
        return [(key, getattr(self, key)) for key in type(self).model_fields]

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]
        """The field names, as iterating a dict gives its keys."""
        return iter(type(self).model_fields)

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


class Delivery(StatsModel):
    """Where batched execution hands batches over (``BatchedStats.delivery``)."""

    mode: str
    """The plan's ``deliver`` setting: ``auto``, ``device`` or ``host``."""
    on: Literal["watching", "device", "host"]
    """Where batches are delivered now (``watching``: the training loop is still watched)."""
    watched: int
    """Batches watched for the training loop's own copy to the device."""
    reason: str
    """Why batches are delivered where they are (empty while watching)."""


class CheckOff(StatsModel):
    """The run-time check of batched execution against per-sample loading, not run."""

    state: Literal["off"] = "off"
    """Always ``off``."""


class BatchedCheck(StatsModel):
    """The run-time check of batched execution against per-sample loading."""

    state: Literal["checking", "kept", "stopped"]
    """``checking`` until decided, then ``kept`` or ``stopped``."""
    delivered: int
    """Batches delivered while checking."""
    block: int
    """Batches per block run one way before switching to the other."""
    batched_intervals: int
    """Intervals between batches timed batched."""
    per_sample_intervals: int
    """Intervals between batches timed per sample."""
    reason: str
    """Why batched execution was kept or stopped (empty while checking)."""


class BatchedVerify(StatsModel):
    """Batches run both ways and compared (``BatchedStats.verify``)."""

    batches: int
    """Batches compared with their CPU reference."""
    mismatches: list[str]
    """The first differences found (deferring stops at the first)."""
    max_abs_diff: float
    """The largest absolute difference over the batches compared."""


class CaptureSummary(StatsModel):
    """CUDA graph capture of batched segments (``BatchedStats.capture``; docs/batched.md)."""

    state: Literal["on", "stopped", "off"] = "off"
    """``on`` capturing, ``stopped`` given up for the run, ``off`` not CUDA or not asked."""
    graphs: int = 0
    """Graphs held now."""
    segments: int = 0
    """Segments handed to capture."""
    eager: int = 0
    """Segments run eagerly (signature new, refused, or capture off)."""
    captured: int = 0
    """Graphs captured and kept (their first replay identical)."""
    replays: int = 0
    """Segments replayed from a graph."""
    evicted: int = 0
    """Graphs dropped to keep at most ``capture_graphs``."""
    refused: dict[str, int] = Field(default_factory=dict)
    """Refused signatures by reason (``sync``, ``error``, ``mismatch``)."""
    off: str = ""
    """Why capture stopped for the run (empty: it did not)."""


class BatchedStats(StatsModel):
    """``get_stats()["batched"]``: batched execution's figures, summed over DataLoader workers
    (:meth:`~codedag.migrate.batched.runtime.BatchedRuntime.stats`, docs/batched.md)."""

    enabled: bool
    """Whether batched execution is applied."""
    deferring: bool
    """Whether samples are still deferred (false once stopped)."""
    device: str
    """The device the batched chains run on."""
    deliver: str
    """The plan's ``deliver`` setting."""
    delivery: Delivery
    """Where batches are handed over, and why."""
    chains: list[str]
    """The ids of the chains run batched."""
    batches: int
    """Batches run batched in the main process."""
    samples: int
    """Deferred samples in them."""
    ready_samples: int
    """Samples forced while fetched that rode along as ready values."""
    groups: int
    """Groups of samples run together, summed over batches."""
    backend_calls: int
    """Backend op invocations (at most steps x groups per batch)."""
    backend_calls_per_batch_max: int
    """The most backend calls of one batch (of the last 1000)."""
    h2d_bytes: int
    """Bytes copied host to device (payload and parameters)."""
    d2h_bytes: int
    """Bytes copied device to host."""
    forced: dict[str, int]
    """Values forced while fetching, by reason (reasons never seen left out)."""
    forced_sites: dict[str, int]
    """Forced values by line of user code (the 20 most frequent)."""
    stopped_sites: list[str]
    """Entry sites that stopped deferring in this process."""
    stopped_sites_in_workers: int
    """Entry sites that stopped deferring in DataLoader workers."""
    retried_samples: int
    """Samples fetched again unpatched after their deferred run failed."""
    worker_ms: float
    """Time spent fetching (recording) samples, summed over processes."""
    main_ms: float
    """Time the main process spent running batches."""
    check: BatchedCheck | CheckOff
    """The run-time check against per-sample loading."""
    verify: BatchedVerify
    """Batches compared with their CPU reference."""
    capture: CaptureSummary = Field(default_factory=CaptureSummary)
    """What CUDA graph capture did."""


class CacheVerify(StatsModel):
    """Cache hits recomputed and compared (``CacheStats.verify``)."""

    checked: int
    """Hits recomputed to compare."""
    mismatches: int
    """Hits that differed from their recomputation."""
    examples: list[str]
    """The first differences found in this process."""


class CacheLookup(StatsModel):
    """Element-wise runs after the cut served through lookup tables (``CacheStats.lookup``)."""

    gathered: int
    """Runs gathered through a table."""
    computed: int
    """Runs computed by their calls (on trial, or where a table did not pay)."""
    mismatches: int
    """Trials where a table differed from the calls."""


class TierStats(StatsModel):
    """One tier of the prefix store (:class:`~codedag.store.lmdb_tier.TierInfo`)."""

    kind: str
    """``ram`` or ``disk``."""
    path: str
    """Its folder."""
    budget_bytes: int
    """Its budget (the map size)."""
    used_bytes: int
    """Bytes of the values and headers it holds."""
    allocated_bytes: int
    """Storage its files occupy."""
    entries: int
    """Values stored."""
    metas: int
    """Intermediate headers stored."""
    generation: int
    """The current generation (runs so far)."""
    enabled: bool
    """Whether this process uses it."""
    problem: str = ""
    """Why it is switched off, if it is."""


class CacheStats(StatsModel):
    """``get_stats()["cache"]``: the prefix cache's figures, summed over processes
    (:meth:`~codedag.migrate.cache.runtime.PrefixCacheRuntime.stats`, docs/cache.md)."""

    enabled: bool
    """Whether the prefix cache is applied."""
    chains: list[str]
    """The ids of the chains cached."""
    hits: int
    """Prefix values read back from the store."""
    misses: dict[str, int]
    """Lookups that found no value, by reason (reasons never seen left out)."""
    hit_rate: float
    """Hits over lookups (0 without lookups)."""
    stored: int
    """Values written to the store."""
    not_stored_full: int
    """Values not stored: the store was full."""
    not_stored_changed: int
    """Values not stored: written to between the cut and the store."""
    not_stored_dropped: int
    """Values not stored: the write queue stayed full."""
    not_stored_later: int = 0
    """Values left for a later epoch to store: storing them would have passed the storing share."""
    unpaid: int
    """Chains found not to pay for storing (no longer cached)."""
    evictions: int
    """Values evicted to make room."""
    corrupt: int
    """Stored values found damaged (removed, never served)."""
    bytes: dict[str, int]
    """Bytes held, per tier kind."""
    allocated_bytes: dict[str, int]
    """Storage the tiers' files occupy, per tier kind."""
    budget_bytes: dict[str, int]
    """Each tier's budget, per tier kind."""
    tiers: list[TierStats]
    """Every tier of the store."""
    verify: CacheVerify
    """Hits recomputed and compared."""
    read_ms: float
    """Time reading values back."""
    write_ms: float
    """The writer threads' time storing values."""
    queue_ms: float
    """The loading threads' share of storing: encoding and queueing."""
    hit_bytes: int
    """Bytes of the values read back."""
    lookup: CacheLookup
    """Element-wise runs after the cut served through lookup tables."""
    diverged: dict[str, int]
    """Chain and reason of values computed outside their chain (the 10 most frequent)."""
    problems: list[str]
    """Why tiers of the store are switched off."""


class TablesStats(StatsModel):
    """``get_stats()["tables"]``: the lookup tables' figures, summed over processes
    (:meth:`~codedag.migrate.tables.runtime.TablesRuntime.stats`, docs/tables.md)."""

    enabled: bool
    """Whether the lookup tables are applied."""
    producers: list[str]
    """Functions whose outputs start runs."""
    runs: int
    """Runs started."""
    gathered: int
    """Runs gathered through a table."""
    computed: int
    """Runs computed by their calls (trials, and tables that did not pay)."""
    trials: int
    """Runs computed both ways to try a table."""
    mismatches: int
    """Trials where a table differed from the calls (never used then)."""
    errors: int
    """Batches run again without runs after one failed."""


class WarmStats(StatsModel):
    """``get_stats()["loader"]["warm"]``: DataLoader settings switched for the epochs the
    prefix cache serves (:meth:`~codedag.migrate.warm_loader.WarmSwitch.stats`)."""

    settings: dict[str, int | bool | None]
    """The warm settings (``LoaderSettings`` fields)."""
    changed: list[str]
    """Settings the warm ones change."""
    warm_epochs: int
    """Epochs run with the warm settings."""
    cold_epochs: int
    """Epochs run with the cold ones."""
    switches: int
    """Switches made between them."""
    stopped: dict[str, str]
    """Dataset type -> why switching stopped."""


class LoaderStats(StatsModel):
    """``get_stats()["loader"]``: what the DataLoader settings patch did
    (:meth:`~codedag.migrate.loader_settings.LoaderSettingsPatch.stats`, docs/loader-tuning.md)."""

    settings: dict[str, int | bool | None]
    """The settings applied (``LoaderSettings`` fields)."""
    changed: list[str]
    """Settings the plan changes."""
    dataloaders: int
    """DataLoaders seen."""
    applied: int
    """DataLoaders the settings were applied to."""
    kept_explicit: dict[str, int]
    """Setting -> DataLoaders that kept it because the code passes it explicitly."""
    kept_for_draws: dict[str, int]
    """Setting -> DataLoaders that kept it because it would change the random draws."""
    reseeded_each_epoch: int
    """DataLoaders whose workers are seeded again each epoch."""
    overridden: dict[str, int]
    """Setting -> DataLoaders whose explicit value the plan replaced."""
    wrapped_worker_init_fn: int
    """DataLoaders whose ``worker_init_fn`` was wrapped (threads, seeds)."""
    skipped: dict[str, int]
    """Why DataLoaders were left alone -> how many."""
    applied_now: bool
    """Whether the patch is installed now."""
    warm: WarmStats | None
    """The switch to warm settings, or None without warm settings."""


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
        loader: the DataLoader settings applied and kept, or None without a ``loader`` section.
        batched: batched execution's figures, or :class:`Off`.
        cache: the prefix cache's figures, or :class:`Off`.
        tables: the lookup tables' figures, or :class:`Off`.
    """

    functions: dict[str, dict[str, Any]] = Field(default_factory=dict)
    totals: CallTotals = Field(default_factory=CallTotals)
    skipped: dict[str, str] = Field(default_factory=dict)
    failed: dict[str, str] = Field(default_factory=dict)
    device_map: dict[str, str] = Field(default_factory=dict)
    value_cache: ValueCacheCounts = Field(default_factory=ValueCacheCounts)
    applied: bool = False
    guard: GuardSummary | Off = Field(default_factory=Off)
    loader: LoaderStats | None = None
    batched: BatchedStats | Off = Field(default_factory=Off)
    cache: CacheStats | Off = Field(default_factory=Off)
    tables: TablesStats | Off = Field(default_factory=Off)

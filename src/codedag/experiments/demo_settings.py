"""Settings and result records of ``codedag demo``."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from codedag.errors import ConfigError
from codedag.migrate.stats import (
    BatchedStats,
    CacheStats,
    GuardSummary,
    Off,
    StatsModel,
    TablesStats,
)
from codedag.plan import LoaderSection

TASKS = ("image", "audio")


@dataclass
class DemoSettings:
    """What ``codedag demo`` runs; the defaults finish in minutes on a 2-core CPU machine."""

    task: str = "image"
    batches: int = 12  # per mode, over every epoch
    epochs: int = 2  # passes over the data set, which holds ceil(batches / epochs) batches
    batch_size: int = 32
    workers: int = 0
    device: str | None = None  # None: cuda when present, else cpu
    out_dir: Path = Path("codedag-out")
    seed: int = 0
    samples: int = 0  # 0: enough for the batches of one epoch
    image_size: int = 128
    source_size: int = 256
    check_batches: int = 3
    k: int = 2
    tune: bool = True  # measure the DataLoader's settings; the optimized run uses them
    batched: str = "auto"  # sample chains run batched: where measured faster, always or never
    sinks: tuple[str, ...] = ()  # where the monitor's records also go: tensorboard, mlflow[:URI]
    cache: bool = True  # the prefix cache: each sample's deterministic prefix computed once

    @property
    def dataset_len(self) -> int:
        """Samples in the data set: ``samples``, else one epoch of the batches."""
        per_epoch = -(-self.batches // max(1, self.epochs))
        return self.samples or per_epoch * self.batch_size

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form for the results files: paths as text, sink URIs without credentials."""
        from codedag.util.text import redact_uri

        out = {k: str(v) if isinstance(v, Path) else v for k, v in asdict(self).items()}
        out["sinks"] = [redact_uri(sink) for sink in self.sinks]
        return out

    def validate(self) -> None:
        """Raise :class:`ConfigError` naming the first bad setting."""
        if self.task not in TASKS:
            raise ConfigError(f"task must be one of {', '.join(TASKS)}, got {self.task!r}")
        for name in ("batches", "batch_size", "epochs"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.workers < 0:
            raise ConfigError(f"workers must be >= 0, got {self.workers}")
        if self.batched not in ("auto", "always", "never"):
            raise ConfigError(f"batched must be auto, always or never, got {self.batched!r}")
        if self.device is not None and not (
            self.device == "cpu" or self.device == "cuda" or self.device.startswith("cuda:")
        ):
            raise ConfigError(f"device must be cpu, cuda or cuda:N, got {self.device!r}")
        if self.task == "image" and self.image_size < 16:
            raise ConfigError(f"image_size must be >= 16, got {self.image_size}")
        from codedag.monitor.sinks.specs import check_spec

        for sink in self.sinks:
            check_spec(sink)


@dataclass
class ModeSummary:
    """Per-mode figures of the summary table."""

    mode: str
    batches: int
    mean_step_s: float  # data wait + batch, the warm-up batches left out
    p50_batch_s: float  # batch time alone (start_batch to end_batch)
    p95_batch_s: float
    data_wait_share: float
    throughput_samples_s: float
    final_loss: float | None
    step_std_s: float = 0.0
    warmup_batches: int = 0  # first batches left out of the figures


@dataclass
class EpochSummary:
    """One epoch of one mode: its batches, samples and time (data wait and step together)."""

    mode: str
    epoch: int  # 1, 2, ...
    batches: int
    samples: int
    seconds: float
    data_wait_s: float

    @property
    def samples_per_s(self) -> float:
        """Samples per second of the epoch."""
        return self.samples / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form, with samples/s and the data-wait share."""
        share = self.data_wait_s / self.seconds if self.seconds > 0 else 0.0
        return asdict(self) | {"samples_per_s": self.samples_per_s, "data_wait_share": share}


def epoch_speedups(epochs: list[EpochSummary]) -> list[float]:
    """Samples/s of each epoch of the optimized run over the baseline's same epoch."""
    by = {(e.mode, e.epoch): e for e in epochs}
    out = []
    for number in sorted({e.epoch for e in epochs}):
        base, opt = by.get(("baseline", number)), by.get(("optimization", number))
        if base is None or opt is None or not base.samples_per_s:
            break
        out.append(opt.samples_per_s / base.samples_per_s)
    return out


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Equivalence(_Record):
    """The migrated batches against the baseline's: equal within ``tolerance``, or why not
    (``reason``: the shapes or dtypes differ, and the figures are left out)."""

    passed: bool
    batches_compared: int | None = None
    labels_equal: bool | None = None
    max_abs_diff: float | None = None
    mean_abs_diff: float | None = None
    elements_beyond_tolerance: int | None = None
    elements: int | None = None
    tolerance: float | None = None
    reason: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form: the figures measured, nothing left out as null."""
        return self.model_dump(exclude_none=True)


class PlanSummary(_Record):
    """The plan in short: contexts and functions it migrates, and its notes."""

    contexts_to_migrate: int = 0
    functions: list[str] = []
    notes: list[str] = []


class PlacementRow(_Record):
    """One function calibration measured: its calls, how many the plan placed, the library's
    and torch's time over all of them (ns) and why it stays (``reason``)."""

    function: str
    calls: int = 0
    placed: int = 0
    library_ns: int = 0
    torch_ns: int = 0
    reason: str = ""
    speedup: float | None = None  # library / torch time; None: torch not timed


class BatchedChainSummary(StatsModel):
    """One sample chain of the plan and its batched decision."""

    id: str
    """The chain's name (``chain0``)."""
    steps: list[str]
    """Its operations in order."""
    batched: bool
    """Whether it runs batched."""
    basis: str
    """``measured``, ``assumed`` or ``none``."""
    original_ms: float | None
    """The per-sample chain with the original libraries, for one batch (None: not measured)."""
    batched_ms: float | None
    """The chain as one batched run, for one batch (None: not measured)."""
    batch_size: int
    """Samples per batch the two times are for."""
    backend_calls: int | None
    """Backend calls of one batched run (None: not measured)."""
    reason: str
    """Why, with the figures."""


class BatchedSummary(StatsModel):
    """The plan's sample chains with their batched decisions, and the run's batched figures
    (``demo_summary.json``'s ``batched``)."""

    mode: str
    """The plan's batched mode: ``auto``, ``always`` or ``never``."""
    device: str | None
    """Where batched chains run."""
    chains: list[BatchedChainSummary]
    """Every sample chain of the plan."""
    stats: BatchedStats | None
    """The optimized run's batched figures (None: nothing ran batched)."""


class CacheChainSummary(StatsModel):
    """One chain of the plan's cache section and its cut."""

    id: str
    """The chain's name."""
    steps: list[str]
    """Its operations in order."""
    cached: bool
    """Whether its prefix is cached."""
    cut: str | None
    """The step after which the value is stored (None: not cached)."""
    bytes_per_sample: int
    """Bytes of the stored value per sample."""
    saved_ms: float
    """What a hit saves, per sample."""
    reason: str
    """Why the chain is cached or not."""


class CacheSummary(StatsModel):
    """The plan's cache section in short, with the run's counters (``demo_summary.json``'s
    ``cache``)."""

    mode: str
    """The plan's cache mode."""
    budget_bytes: int
    """The store's budget."""
    bytes_total: int
    """Bytes the cached chains store over the data set."""
    saved_ms_per_sample: float
    """What the cache saves per sample."""
    write_ms_per_sample: float
    """What storing costs per sample."""
    note: str
    """The plan's note on the cache."""
    chains: list[CacheChainSummary]
    """Every chain of the section."""
    stats: CacheStats | None
    """The optimized run's cache figures (None: the cache did not run)."""
    tables: TablesStats | None
    """The optimized run's lookup tables' figures (None: they did not run)."""
    first_epoch: str = ""
    """How the first epoch stores values, and why (the plan's line)."""


@dataclass
class DemoResult:
    """Everything ``codedag demo`` measured and wrote."""

    settings: DemoSettings
    device: str
    modes: list[ModeSummary]
    speedup: float | None  # median step times, baseline / optimization, warm-up left out
    migrated_calls: dict[str, int]
    fallbacks: dict[str, int]
    fallback_reasons: dict[str, dict[str, int]]
    equivalence: Equivalence
    plan_summary: PlanSummary
    placement: list[PlacementRow] = field(default_factory=list)
    verdict: str = ""
    guard: GuardSummary | Off = field(default_factory=Off)  # the run-time check
    files: dict[str, str] = field(default_factory=dict)
    loader: LoaderSection | None = None  # the plan's loader section, when tuned
    batched: BatchedSummary | None = None  # chains, decisions, run-time stats
    epochs: list[EpochSummary] = field(default_factory=list)  # per mode, per epoch
    cache: CacheSummary | None = None  # the plan's cuts and the run's counts (no section: None)

    def epoch(self, mode: str, number: int) -> EpochSummary | None:
        """Epoch ``number`` (1, 2, ...) of ``mode``, if it ran."""
        return next((e for e in self.epochs if e.mode == mode and e.epoch == number), None)

    speedup_spread: float | None = None  # half-width of the speedup's 95 % interval
    difference: str | None = None  # faster, slower, or "no difference" (within the spread)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (``demo_summary.json``, ``codedag demo --json``)."""
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(
            settings=self.settings.to_dict(),
            modes=[asdict(m) for m in self.modes],
            equivalence=self.equivalence.to_dict(),
            plan_summary=self.plan_summary.model_dump(),
            placement=[r.model_dump() for r in self.placement],
            guard=self.guard.model_dump(mode="json"),
            loader=None if self.loader is None else self.loader.model_dump(mode="json"),
            epochs=[e.to_dict() for e in self.epochs],
            batched={} if self.batched is None else self.batched.model_dump(mode="json"),
            cache={} if self.cache is None else self.cache.model_dump(mode="json"),
        )
        return out

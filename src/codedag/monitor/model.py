"""The results file as one model: what :class:`~codedag.monitor.experiment.ExperimentMonitor`
writes and everything that reads ``results.json`` (reports, plots, replays, ``codedag tune``).

:class:`RunResults` holds the run (environment, modes), :class:`ModeResults` one mode (series,
resource usage, logged metrics, :class:`ModeSummary`). The monitor builds a ``RunResults`` and
dumps it; :func:`codedag.monitor.results.load_results` validates and upgrades a file into one.
The JSON keys and values are exactly those of the layout in :mod:`codedag.monitor.results`:
unknown keys are kept, numbers keep their JSON type (a batch index stays an int), and a key the
file does not hold is not added when the model is written back (:meth:`Part.to_dict`).

Every part is also a read-only mapping with the file's keys (``results["modes"]["baseline"]
["summary"]["num_batches"]``), so code written against the JSON dict keeps working.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Number = int | float  # strict: an int stays an int (the JSON text is unchanged), a bool is refused
Point = list[Number]  # ``[x, value]`` or ``[epoch, batch, value]``
Series = list[Point]


class Part(BaseModel, Mapping[str, Any]):
    """A section of the results file: typed attributes, and read-only mapping access by JSON key.

    The mapping holds the keys the file (or the writer) gave, not the defaults of absent ones.
    """

    # Unknown keys are kept (files written by a newer minor version round-trip); known keys are
    # type-checked strictly.
    model_config = ConfigDict(extra="allow", strict=True)

    def __getitem__(self, key: str) -> Any:
        if key in self.model_fields_set or key in (self.model_extra or {}):
            return getattr(self, key)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:  # type: ignore[override]
        given = self.model_fields_set
        yield from (name for name in type(self).model_fields if name in given)
        yield from self.model_extra or {}

    def __len__(self) -> int:
        return len(self.model_fields_set) + len(self.model_extra or {})

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BaseModel):
            return super().__eq__(other)
        if isinstance(other, Mapping):
            return self.to_dict() == dict(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form: the keys that were given, nested parts as dicts."""
        return self.model_dump(exclude_unset=True)


class TimeStats(Part):
    """Mean, spread and quantiles of a time in seconds (``batch_time``; ``steady`` has no
    ``min``/``max``)."""

    mean: Number | None = None
    std: Number | None = None
    min: Number | None = None
    max: Number | None = None
    p50: Number | None = None
    p95: Number | None = None


class WaitStats(TimeStats):
    """The data wait in seconds: :class:`TimeStats` plus its total and its share of the steps."""

    total: Number | None = None
    share_pct: Number | None = None


class StepTime(Part):
    """Data wait plus batch time in seconds (``steady`` adds the quartiles)."""

    mean: Number | None = None
    std: Number | None = None
    total: Number | None = None
    p25: Number | None = None
    p50: Number | None = None
    p75: Number | None = None
    p95: Number | None = None


class Throughput(Part):
    """Steps and samples per second of step time (``samples_per_s``: null when not counted)."""

    batches_per_s: Number | None = None
    samples_per_s: Number | None = None


class LossSummary(Part):
    """The logged loss: first, last, lowest and highest value, and how many were (not) finite."""

    initial: Number | None = None
    final: Number | None = None
    min: Number | None = None
    max: Number | None = None
    count: int | None = None
    nonfinite: int | None = None


class AccuracySummary(Part):
    """The logged accuracy: first, last and best value."""

    initial: Number | None = None
    final: Number | None = None
    best: Number | None = None
    count: int | None = None
    nonfinite: int | None = None


class SteadySummary(Part):
    """The steps after the first ``warmup_batches`` (start-up left out): the figures modes are
    compared by."""

    warmup_batches: int = 0
    num_batches: int = 0
    step_time: StepTime | None = None
    batch_time: TimeStats | None = None
    data_wait: WaitStats | None = None
    throughput: Throughput | None = None


class SeriesStats(Part):
    """Mean, maximum and sample count of one resource series."""

    mean: Number | None = None
    max: Number | None = None
    count: int | None = None


class ResourceSummary(Part):
    """The resource sampler: interval, samples, failures, each series' figures, its own CPU use."""

    interval_s: Number | None = None
    samples: int | None = None
    errors: int | None = None
    series: dict[str, SeriesStats] = Field(default_factory=dict)
    sampler_cpu_s: Number | None = None
    sampler_cpu_pct: Number | None = None


class TimingInfo(Part):
    """How steps were timed on the device (``cuda_timing`` used and the one asked for)."""

    cuda_timing: str | None = None
    requested: str | None = None


class ModeSummary(Part):
    """A mode's figures over every step (``steady``: without the warm-up steps).

    ``data_wait`` is null in files whose writer did not measure it; ``loss`` and ``accuracy`` are
    null when nothing was logged.
    """

    total_time: Number = 0
    num_batches: int = 0
    batch_time: TimeStats | None = None
    data_wait: WaitStats | None = None
    step_time: StepTime | None = None
    throughput: Throughput | None = None
    timing: TimingInfo | None = None
    steady: SteadySummary | None = None
    loss: LossSummary | None = None
    accuracy: AccuracySummary | None = None
    resources: ResourceSummary | None = None


class ResourceUsage(Part):
    """Resource series over time: host ones ``[[ts, value]]``, GPU ones per device index."""

    cpu_usage: Series = Field(default_factory=list)
    memory_usage: Series = Field(default_factory=list)
    memory_used_mb: Series = Field(default_factory=list)
    process_cpu_usage: Series = Field(default_factory=list)
    process_memory_mb: Series = Field(default_factory=list)
    workers_cpu_usage: Series = Field(default_factory=list)
    workers_memory_mb: Series = Field(default_factory=list)
    workers: Series = Field(default_factory=list)
    gpu_usage: dict[str, Series] = Field(default_factory=dict)
    gpu_memory: dict[str, Series] = Field(default_factory=dict)
    gpu_power_w: dict[str, Series] = Field(default_factory=dict)
    gpu_temperature_c: dict[str, Series] = Field(default_factory=dict)
    gpu_energy_j: dict[str, Series] = Field(default_factory=dict)

    def series(self, key: str) -> dict[str, Series]:
        """The points of series ``key`` by device index (``{"": points}`` for a host series);
        empty when it was not recorded."""
        value = getattr(self, key, None)
        if isinstance(value, dict):
            return {str(device): points for device, points in value.items()}
        return {"": value} if isinstance(value, list) else {}


class MetricSeries(Part):
    """Logged values as ``[[epoch, batch, value]]``."""

    losses: Series = Field(default_factory=list)
    accuracies: Series = Field(default_factory=list)


class ModeResults(Part):
    """One mode (``baseline``, ``optimization``, ...): its settings, status, series and summary.

    Attributes:
        config: the run's settings, as given to ``start_mode``.
        status: ``running``, ``completed``, ``interrupted`` or ``failed``.
        batch_times: ``[[batch, seconds]]`` (bucket means when ``downsampling`` says so).
        data_wait_times: ``[[batch, seconds]]``.
        resources: the resource probe's description.
        downsampling: raw values per kept point of each series.
        files: the raw CSV streams, relative to the results file.
    """

    config: dict[str, Any] = Field(default_factory=dict)
    status: str = "completed"
    error: str | None = None
    started_at: Number | None = None
    ended_at: Number | None = None
    batch_times: Series = Field(default_factory=list)
    data_wait_times: Series = Field(default_factory=list)
    resource_usage: ResourceUsage = Field(default_factory=ResourceUsage)
    metrics: MetricSeries = Field(default_factory=MetricSeries)
    summary: ModeSummary = Field(default_factory=ModeSummary)
    resources: dict[str, Any] | None = None
    downsampling: dict[str, int] = Field(default_factory=dict)
    files: dict[str, str | None] = Field(default_factory=dict)

    def stride(self, key: str) -> int:
        """Raw values per kept point of series ``key`` (1: every value)."""
        return max(1, self.downsampling.get(key, 1))


class LaunchInfo(Part):
    """A distributed launch: this rank, the world size and the launcher's run identifiers."""

    rank: int | None = None
    world_size: int | None = None
    local_rank: int | None = None
    ids: dict[str, str] = Field(default_factory=dict)


class Environment(Part):
    """What the run measured on (host, Python, torch, CUDA, GPUs, CPU and memory limits; see
    :mod:`codedag.monitor.environment`), and its rank in a distributed launch."""

    rank: int = 0
    world_size: int = 1
    launch: LaunchInfo | None = None
    gpu_reason: str | None = None


class RunResults(Part):
    """A monitored run: what ``results.json`` holds.

    Attributes:
        schema_version: the file format's version (:data:`codedag.monitor.results.SCHEMA_VERSION`).
        experiment_name: the monitor's experiment name.
        timestamp: when the monitor was created, epoch seconds.
        environment: what the run measured on.
        modes: every mode by name, in the order they ran.
    """

    schema_version: int = 0
    codedag_version: str | None = None
    experiment_name: str
    timestamp: Number = 0
    datetime: str = ""
    environment: Environment = Field(default_factory=Environment)
    modes: dict[str, ModeResults] = Field(default_factory=dict)

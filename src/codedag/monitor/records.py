"""What the monitor hands its sinks: one record type per thing it measures, as plain data.

- :class:`StepRecord`: one training step (batch time, data wait, samples), folded from the hot
  path in blocks;
- :class:`~codedag.monitor.probes.ResourceSample`: one resource sample (CPU, memory, the
  DataLoader workers, the GPUs), from the sampler's thread;
- :class:`MetricRecord`: one logged loss or accuracy;
- :class:`RunInfo`, :class:`ModeInfo`, :class:`ModeEnd`: the run and each mode (baseline,
  optimization, ...) starting and ending, with what the summaries say.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from codedag.monitor.model import ModeSummary


class StepRecord(NamedTuple):
    """One training step of a mode.

    Attributes:
        step: the step's index in its mode (0, 1, ...).
        time_s: when the step ended, seconds since the mode started.
        batch_time_s: ``start_batch()`` to ``end_batch()``.
        data_wait_s: the wait for this step's batch.
        samples: samples in the batch (0 when not known).
    """

    step: int
    time_s: float
    batch_time_s: float
    data_wait_s: float
    samples: int

    @property
    def data_wait_share_pct(self) -> float:
        """The share of the step spent waiting for data, in percent."""
        total = self.batch_time_s + self.data_wait_s
        return 100.0 * self.data_wait_s / total if total > 0 else 0.0


class MetricRecord(NamedTuple):
    """One logged value.

    Attributes:
        name: ``loss`` or ``accuracy``.
        epoch: the epoch the caller gave.
        batch: the batch the caller gave.
        value: the value (may be NaN or infinite: a diverging loss).
        step: the mode's step it belongs to (the step open when it was logged, else the last
            one ended; -1 before the first).
        time_s: when it was logged, seconds since the mode started.
    """

    name: str
    epoch: int
    batch: int
    value: float
    step: int = -1
    time_s: float = 0.0


@dataclass(frozen=True)
class RunInfo:
    """The run every mode belongs to.

    Attributes:
        experiment_name: the monitor's experiment name.
        run_dir: the folder of ``results.json``.
        environment: host, Python, torch, CUDA, CPU and memory limits (the results' facts).
    """

    experiment_name: str
    run_dir: Path
    environment: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class ModeInfo:
    """A mode starting.

    Attributes:
        name: the mode's name (``baseline``).
        file_stem: the name made safe for file names.
        config: the mode's settings, JSON-safe.
        started_at: epoch seconds.
        cpu_limit_cpus: the container's CPU quota in CPUs (``None``: no quota).
        cpu_capacity_cpus: the CPUs the job may use (its quota, else its affinity set); CPU
            percentages are of this.
        resource_interval_s: seconds between resource samples (``None``: not sampled).
    """

    name: str
    file_stem: str
    config: dict[str, Any]
    started_at: float
    cpu_limit_cpus: float | None = None
    cpu_capacity_cpus: float | None = None
    resource_interval_s: float | None = None


@dataclass(frozen=True)
class ModeEnd:
    """A mode ending.

    Attributes:
        name: the mode's name.
        status: ``completed``, ``interrupted`` or ``failed``.
        error: what interrupted it.
        steps: steps recorded.
        figures: the summary's headline figures by name (``step_time_mean_s``,
            ``data_wait_share_pct``, ...; see :func:`summary_figures`).
    """

    name: str
    status: str
    error: str | None
    steps: int
    figures: dict[str, float]


def summary_figures(summary: ModeSummary) -> dict[str, float]:
    """The headline numbers of a mode's summary, flat, by name.

    Steady-state figures (warm-up batches left out) are used where the summary has them.
    """
    steady = summary.steady
    figures = steady if steady is not None else summary
    step, batch, wait = figures.step_time, figures.batch_time, figures.data_wait
    rate, loss, accuracy = figures.throughput, summary.loss, summary.accuracy
    series = summary.resources.series if summary.resources is not None else {}
    cpu, workers_cpu, workers_memory = (
        series.get(key) for key in ("cpu_usage", "workers_cpu_usage", "workers_memory_mb")
    )
    pairs = {
        "total_time_s": summary.total_time,
        "steps": summary.num_batches,
        "warmup_steps": None if steady is None else steady.warmup_batches,
        "step_time_mean_s": None if step is None else step.mean,
        "step_time_p50_s": None if step is None else step.p50,
        "batch_time_mean_s": None if batch is None else batch.mean,
        "batch_time_p50_s": None if batch is None else batch.p50,
        "batch_time_p95_s": None if batch is None else batch.p95,
        "data_wait_mean_s": None if wait is None else wait.mean,
        "data_wait_share_pct": None if wait is None else wait.share_pct,
        "samples_per_s": None if rate is None else rate.samples_per_s,
        "batches_per_s": None if rate is None else rate.batches_per_s,
        "loss_final": None if loss is None else loss.final,
        "accuracy_final": None if accuracy is None else accuracy.final,
        "cpu_mean_pct": None if cpu is None else cpu.mean,
        "workers_cpu_mean_pct": None if workers_cpu is None else workers_cpu.mean,
        "workers_memory_max_mb": None if workers_memory is None else workers_memory.max,
    }
    energy = [s.max for key, s in series.items() if key.startswith("gpu_energy_j/")]
    if energy and all(isinstance(e, int | float) for e in energy):
        pairs["gpu_energy_j"] = sum(e for e in energy if e is not None)
    return {
        k: float(v)
        for k, v in pairs.items()
        if isinstance(v, int | float) and not isinstance(v, bool) and v == v
    }

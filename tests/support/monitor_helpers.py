"""Helpers of the monitor tests: a deterministic probe, a small recorded run, a results file in
the original format."""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.probes import GpuReading, ResourceSample
from codedag.monitor.records import MetricRecord, ModeEnd, ModeInfo, RunInfo, StepRecord
from codedag.monitor.sinks.base import Sink

_ORIGINAL_FORMAT: dict[str, Any] = {  # no schema_version, no data wait, partial summaries
    "experiment_name": "BirdCLEF_2023",
    "timestamp": 1705312200,
    "datetime": "2024-01-15T10:30:00",
    "modes": {
        "baseline": {
            "config": {"epochs": 2, "batch_size": 32},
            "batch_times": [[0, 0.15], [1, 0.14], [2, 0.16]],
            "resource_usage": {
                "cpu_usage": [[1705312200, 45.2]],
                "gpu_usage": {"0": [[1705312200, 78.5]]},
                "gpu_memory": {"0": [[1705312200, 2048]]},
            },
            "metrics": {"losses": [[0, 0, 2.5], [0, 1, 2.3]], "accuracies": [[0, 0, 0.65]]},
            "summary": {
                "total_time": 120.5,
                "batch_time": {"mean": 0.145, "std": 0.02, "min": 0.12, "max": 0.18},
            },
        },
        "optimization": {
            "config": {},
            "batch_times": [[0, 0.1], [1, 0.09]],
            "data_wait_times": [[0, 0.01], [1, 0.02]],
            "resource_usage": {},
            "metrics": {},
            "summary": {},
        },
    },
}


def original_format_results() -> dict[str, Any]:
    """A fresh copy of a results file in the original format (two modes, the second bare)."""
    return copy.deepcopy(_ORIGINAL_FORMAT)


class CountingProbe:
    """Every sample differs: CPU 10, 20, 30 ... percent, two GPUs at 40+i and 80+i percent."""

    def __init__(self, gpus: int = 2) -> None:
        self.n = itertools.count()
        self.gpus = gpus

    def sample(self) -> ResourceSample:
        i = next(self.n)
        return ResourceSample(
            timestamp=1_700_000_000.0 + i,
            cpu_pct=10.0 * (i + 1),
            memory_pct=50.0,
            memory_used_mb=1024.0,
            process_cpu_pct=5.0,
            process_memory_mb=300.0 + i,
            gpus=[
                GpuReading(g, 40.0 * (g + 1) + i, 2048.0 * (g + 1), 200.0, 50.0)
                for g in range(self.gpus)
            ],
        )

    def describe(self) -> dict[str, Any]:
        return {"cpu_source": "counting probe", "cpu_capacity_cpus": 4.0, "gpus": []}


def record_run(
    run_dir: Path,
    modes: dict[str, float] | None = None,
    batches: int = 12,
    **monitor_kwargs: Any,
) -> Path:
    """A monitored run with one mode per entry (name -> loss scale); returns results.json."""
    modes = modes if modes is not None else {"baseline": 1.0}
    monitor = ExperimentMonitor(
        "unit", run_dir=run_dir, probe_factory=CountingProbe, **monitor_kwargs
    )
    for name, scale in modes.items():
        monitor.start_mode(name, config={"epochs": 2, "batch_size": 8}, resource_interval=0.005)
        for epoch in range(2):
            for batch in range(batches // 2):
                monitor.start_batch()
                sum(range(2000 if name == "baseline" else 500))  # some work
                monitor.end_batch(n_samples=8)
                monitor.log_loss(epoch, batch, scale * 2.0 / (1 + epoch * 6 + batch))
                monitor.log_accuracy(epoch, batch, 0.5 + 0.04 * (epoch * 6 + batch))
        monitor.stop_mode()
    return monitor.save_json()


class RecordingSink(Sink):
    """Keeps every record it receives, in order, by kind."""

    name = "recording"

    def __init__(self) -> None:
        self.runs: list[RunInfo] = []
        self.modes: list[ModeInfo] = []
        self.steps: dict[str, list[StepRecord]] = {}
        self.metrics: dict[str, list[MetricRecord]] = {}
        self.resources: dict[str, list[ResourceSample]] = {}
        self.ends: list[ModeEnd] = []
        self.artifacts: list[Path] = []
        self.closed = 0

    def open_run(self, run: RunInfo) -> None:
        self.runs.append(run)

    def start_mode(self, mode: ModeInfo) -> None:
        self.modes.append(mode)

    def log_steps(self, mode: str, steps: Sequence[StepRecord]) -> None:
        self.steps.setdefault(mode, []).extend(steps)

    def log_metrics(self, mode: str, rows: Sequence[MetricRecord]) -> None:
        self.metrics.setdefault(mode, []).extend(rows)

    def log_resources(self, mode: str, sample: ResourceSample) -> None:
        self.resources.setdefault(mode, []).append(sample)

    def end_mode(self, end: ModeEnd) -> None:
        self.ends.append(end)

    def log_artifact(self, path: Path) -> None:
        self.artifacts.append(path)

    def close(self) -> None:
        self.closed += 1


class FailingSink(Sink):
    """Raises in ``method`` (and counts the calls it got)."""

    name = "failing"

    def __init__(self, method: str = "log_steps") -> None:
        self.method = method
        self.calls = 0

    def __getattribute__(self, name: str) -> Any:
        if name == object.__getattribute__(self, "method"):

            def fail(*args: Any) -> None:
                self.calls += 1
                raise RuntimeError("the dashboard is down")

            return fail
        return object.__getattribute__(self, name)

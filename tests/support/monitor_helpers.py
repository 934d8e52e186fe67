"""Helpers of the monitor tests: a deterministic probe and a small recorded run."""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.probes import GpuReading, ResourceSample


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

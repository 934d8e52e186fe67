"""Replays of a saved run: resource samples and GPU readings played back from a results file.

Tests (and demos on machines without the hardware) use these in place of the live probes:
``ResourceMonitor(probe=ReplayProbe("results.json", "baseline"))`` produces the recorded
series again, and ``ReplayGPUs`` answers the ``GPUs`` interface with the recorded GPU readings.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from codedag.devices.gpus import GPUInfo, GPUs, GPUSample
from codedag.errors import ConfigError
from codedag.monitor.model import RunResults
from codedag.monitor.probes import ResourceSample
from codedag.monitor.resources import GPU_SERIES, HOST_SERIES, sample_from_rows
from codedag.monitor.results import load_results


def recorded_samples(
    source: str | os.PathLike[str] | Mapping[str, Any] | RunResults, mode: str
) -> list[ResourceSample]:
    """The resource samples of ``mode`` in a results file, merged by timestamp, in order."""
    results = load_results(source)
    if mode not in results.modes:
        raise ConfigError(f"mode {mode!r} not in the results; modes: {list(results.modes)}")
    usage = results.modes[mode].resource_usage
    rows: dict[float, list[tuple[str, float]]] = defaultdict(list)
    for key in HOST_SERIES.values():
        for ts, value in usage.series(key).get("", []):
            rows[ts].append((key, value))
    for key in GPU_SERIES.values():
        for device, points in usage.series(key).items():
            for ts, value in points:
                rows[ts].append((f"{key}/{device}", value))
    return [sample_from_rows(ts, rows[ts]) for ts in sorted(rows)]


class ReplayProbe:
    """A probe that returns a saved run's samples one by one (the last one repeats at the end)."""

    def __init__(
        self, source: str | os.PathLike[str] | Mapping[str, Any] | RunResults, mode: str
    ) -> None:
        self.samples = recorded_samples(source, mode)
        if not self.samples:
            raise ConfigError(f"mode {mode!r} has no resource samples to replay")
        self._next = 0

    def sample(self) -> ResourceSample:
        """The next recorded sample."""
        sample = self.samples[min(self._next, len(self.samples) - 1)]
        self._next += 1
        return sample

    def describe(self) -> dict[str, Any]:
        """Says that these are replayed samples."""
        return {"cpu_source": "replay", "gpu_source": "replay", "samples": len(self.samples)}


class ReplayGPUs(GPUs):
    """The ``GPUs`` interface answered from a saved run's GPU series."""

    source = "replay"

    def __init__(
        self, source: str | os.PathLike[str] | Mapping[str, Any] | RunResults, mode: str
    ) -> None:
        self._samples = [s.gpus for s in recorded_samples(source, mode) if s.gpus]
        self._next = 0
        self._count = max((len(g) for g in self._samples), default=0)

    def count(self) -> int:
        return self._count

    def info(self) -> list[GPUInfo]:
        return [
            GPUInfo(i, "replayed GPU", 0.0, None, None, False, "replay") for i in range(self._count)
        ]

    def sample(self) -> list[GPUSample]:
        if not self._samples:
            return []
        readings = self._samples[min(self._next, len(self._samples) - 1)]
        self._next += 1
        return [
            GPUSample(r.index, r.util_pct, r.memory_used_mb, r.power_w, r.temperature_c)
            for r in readings
        ]

"""Replays of a saved run: resource samples and GPU readings played back from a results file.

Tests (and demos on machines without the hardware) use these in place of the live probes:
``ResourceMonitor(probe=ReplayProbe("results.json", "baseline"))`` produces the recorded
series again, and ``ReplayGPUs`` answers the ``GPUs`` interface with the recorded GPU readings.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from codedag.devices.gpus import GPUInfo, GPUs, GPUSample
from codedag.errors import ConfigError
from codedag.monitor.probes import GpuReading, ResourceSample
from codedag.monitor.results import load_results

_HOST = {
    "cpu_usage": "cpu_pct",
    "memory_usage": "memory_pct",
    "memory_used_mb": "memory_used_mb",
    "process_cpu_usage": "process_cpu_pct",
    "process_memory_mb": "process_memory_mb",
}
_GPU = {
    "gpu_usage": "util_pct",
    "gpu_memory": "memory_used_mb",
    "gpu_power_w": "power_w",
    "gpu_temperature_c": "temperature_c",
}


def recorded_samples(
    source: str | os.PathLike[str] | dict[str, Any], mode: str
) -> list[ResourceSample]:
    """The resource samples of ``mode`` in a results file, merged by timestamp, in order."""
    results = load_results(source)
    if mode not in results["modes"]:
        raise ConfigError(f"mode {mode!r} not in the results; modes: {list(results['modes'])}")
    usage = results["modes"][mode]["resource_usage"]
    host: dict[float, dict[str, float]] = defaultdict(dict)
    gpus: dict[float, dict[int, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    for key, attr in _HOST.items():
        for ts, value in usage.get(key, []):
            host[ts][attr] = value
    for key, attr in _GPU.items():
        for device, points in usage.get(key, {}).items():
            for ts, value in points:
                gpus[ts][int(device)][attr] = value
    samples = []
    for ts in sorted(set(host) | set(gpus)):
        readings = [GpuReading(index=i, **vals) for i, vals in sorted(gpus.get(ts, {}).items())]
        samples.append(ResourceSample(timestamp=ts, gpus=readings, **host.get(ts, {})))
    return samples


class ReplayProbe:
    """A probe that returns a saved run's samples one by one (the last one repeats at the end)."""

    def __init__(self, source: str | os.PathLike[str] | dict[str, Any], mode: str) -> None:
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

    def __init__(self, source: str | os.PathLike[str] | dict[str, Any], mode: str) -> None:
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

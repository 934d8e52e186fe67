"""GPU energy over one window: NVML's energy counter, plus sampled power, temperature, utilization.

The energy is the difference of ``nvmlDeviceGetTotalEnergyConsumption`` (mJ) between the start and
the end of the window, per GPU. Power, temperature and utilization are sampled by a thread at a
configurable interval; the power samples are also integrated with the trapezoid rule over their
real timestamps (a sample is taken at both edges of the window), reported separately as
``gpu_energy_integrated_joules`` because NVML's power reading is itself an average over up to 1 s.
"""

from __future__ import annotations

import csv
import io
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from codedag.devices.gpus import GPUs, GPUSample
from codedag.util.io import atomic_write_json, atomic_write_text

log = logging.getLogger(__name__)


def trapezoid_j(times_s: Sequence[float], power_w: Sequence[float]) -> float:
    """Integrate power over time with the trapezoid rule on the actual (uneven) spacing."""
    total = 0.0
    for i in range(1, len(times_s)):
        total += 0.5 * (power_w[i] + power_w[i - 1]) * (times_s[i] - times_s[i - 1])
    return total


@dataclass
class GpuEnergyReading:
    """GPU energy and statistics over one window (``None`` where not measured)."""

    indices: list[int]
    counter_j: dict[int, float | None] = field(default_factory=dict)
    integrated_j: dict[int, float | None] = field(default_factory=dict)
    samples: list[tuple[float, GPUSample]] = field(default_factory=list)
    duration_s: float = 0.0
    reason: str | None = None

    def _values(self, attr: str) -> list[float]:
        return [
            v
            for _, s in self.samples
            if (v := getattr(s, attr)) is not None and s.index in self.indices
        ]

    def metrics(self) -> dict[str, object]:
        """The ``energy_metrics`` keys of experiment.json."""
        counters = [self.counter_j.get(i) for i in self.indices]
        total = sum(c for c in counters if c is not None) if counters else None
        if not self.indices or any(c is None for c in counters):
            total = None
        integrated = [self.integrated_j.get(i) for i in self.indices]
        power = self._values("power_w")
        temp = self._values("temperature_c")
        util = self._values("utilization_pct")
        reason = self.reason
        if reason is None and total is None:
            reason = "NVML energy counter not supported on GPU(s) " + ",".join(
                str(i) for i, c in zip(self.indices, counters) if c is None
            )
        return {
            "gpu_energy_total_joules": total,
            "gpu_energy_source": "nvml_energy_counter" if total is not None else "unavailable",
            "gpu_energy_unavailable_reason": None if total is not None else reason,
            "gpu_energy_integrated_joules": (
                sum(i for i in integrated if i is not None)
                if integrated and all(i is not None for i in integrated)
                else None
            ),
            "gpu_power_avg_watts": _mean(power),
            "gpu_power_max_watts": max(power) if power else None,
            "gpu_power_min_watts": min(power) if power else None,
            "gpu_temp_avg_celsius": _mean(temp),
            "gpu_temp_max_celsius": max(temp) if temp else None,
            "gpu_util_avg_percent": _mean(util),
            "gpu_util_max_percent": max(util) if util else None,
            "gpu_indices": self.indices,
            "gpu_sample_count": len(self.samples),
        }

    def write_raw(self, energy_dir: Path) -> None:
        """gpu_power.csv, gpu_temperature.csv, gpu_utilization.csv and gpu_energy.json."""
        if not self.indices:
            return
        for name, attr in (
            ("gpu_power.csv", "power_w"),
            ("gpu_temperature.csv", "temperature_c"),
            ("gpu_utilization.csv", "utilization_pct"),
        ):
            buffer = io.StringIO()
            writer = csv.writer(buffer, lineterminator="\n")
            writer.writerow(["time_s", "gpu", attr, "memory_used_mb"])
            for t, s in self.samples:
                writer.writerow([f"{t:.6f}", s.index, getattr(s, attr), s.memory_used_mb])
            atomic_write_text(energy_dir / name, buffer.getvalue())
        atomic_write_json(
            energy_dir / "gpu_energy.json",
            {
                "duration_s": self.duration_s,
                "counter_joules": {str(k): v for k, v in self.counter_j.items()},
                "integrated_joules": {str(k): v for k, v in self.integrated_j.items()},
                "reason": self.reason,
            },
        )


def _mean(values: list[float]) -> float | None:
    return sum(values) / len(values) if values else None


class GpuEnergyMeter:
    """Measures the GPUs ``indices`` of ``gpus`` between :meth:`start` and :meth:`stop`.

    Args:
        gpus: the GPU interface (NVML or a fake); :class:`EmptyGPUs` gives an empty reading.
        indices: which GPUs (positions in ``gpus``) belong to this window; None means all.
        interval_s: sampling interval of power, temperature and utilization.
    """

    def __init__(self, gpus: GPUs, indices: Sequence[int] | None = None, interval_s: float = 0.1):
        self.gpus = gpus
        self.indices = list(range(gpus.count())) if indices is None else list(indices)
        self.interval_s = interval_s
        self._samples: list[tuple[float, GPUSample]] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._t0 = 0.0
        self._counters0: list[int | None] = []

    def _sample_once(self) -> None:
        now = time.monotonic() - self._t0
        try:
            samples = self.gpus.sample()
        except Exception as error:  # a failing read must not end the experiment
            log.debug("GPU sample failed: %s", error)
            return
        self._samples.extend((now, s) for s in samples if s.index in self.indices)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._sample_once()

    def start(self) -> None:
        """Read the energy counters, take a first sample and start the sampling thread."""
        if not self.indices:
            return
        self._t0 = time.monotonic()
        self._counters0 = self.gpus.energy_mj()
        self._sample_once()
        self._thread = threading.Thread(target=self._loop, name="gpu-energy", daemon=True)
        self._thread.start()

    def stop(self) -> GpuEnergyReading:
        """Stop sampling, take a last sample, read the counters and integrate."""
        if not self.indices:
            return GpuEnergyReading([], reason=getattr(self.gpus, "reason", None) or "no GPU")
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        self._sample_once()
        counters1 = self.gpus.energy_mj()
        duration = time.monotonic() - self._t0
        reading = GpuEnergyReading(self.indices, samples=self._samples, duration_s=duration)
        for i in self.indices:
            a = self._counters0[i] if i < len(self._counters0) else None
            b = counters1[i] if i < len(counters1) else None
            reading.counter_j[i] = (b - a) / 1000.0 if a is not None and b is not None else None
            points = [
                (t, s.power_w) for t, s in self._samples if s.index == i and s.power_w is not None
            ]
            reading.integrated_j[i] = (
                trapezoid_j([t for t, _ in points], [p for _, p in points])
                if len(points) >= 2
                else None
            )
        return reading

"""ResourceMonitor: a background thread sampling CPU, memory and GPUs at a fixed interval.

Samples go to constant-memory series (downsampled for plots, moments for summaries) and every
sample to ``on_sample`` (the monitor's sinks: raw CSV, TensorBoard, MLflow). After each sample
the thread calls ``on_tick``: the monitor folds there what the training thread buffered (steps,
logged values) and hands it to the sinks, so that work stays off the training thread. The
sampler measures the CPU time of its samples, so their overhead is reported rather than guessed.
See ``codedag.monitor.probes`` for what one sample reads.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from codedag.errors import ConfigError
from codedag.monitor.probes import GpuReading, ResourceSample
from codedag.monitor.stats import Downsampler, RunningStats

log = logging.getLogger(__name__)

# sample attribute -> series name in the results JSON (GPU series get "/<index>")
HOST_SERIES = {
    "cpu_pct": "cpu_usage",
    "memory_pct": "memory_usage",
    "memory_used_mb": "memory_used_mb",
    "process_cpu_pct": "process_cpu_usage",
    "process_memory_mb": "process_memory_mb",
    "workers_cpu_pct": "workers_cpu_usage",
    "workers_memory_mb": "workers_memory_mb",
    "workers": "workers",
}
GPU_SERIES = {
    "util_pct": "gpu_usage",
    "memory_used_mb": "gpu_memory",
    "power_w": "gpu_power_w",
    "temperature_c": "gpu_temperature_c",
    "energy_j": "gpu_energy_j",
}


def sample_rows(sample: ResourceSample) -> list[tuple[str, float]]:
    """``(series name, value)`` of every figure a sample has (``gpu_usage/0`` for GPU 0)."""
    rows: list[tuple[str, float]] = []
    for attr, name in HOST_SERIES.items():
        value = getattr(sample, attr)
        if value is not None:
            rows.append((name, float(value)))
    for gpu in sample.gpus:
        for attr, name in GPU_SERIES.items():
            value = getattr(gpu, attr)
            if value is not None:
                rows.append((f"{name}/{gpu.index}", float(value)))
    return rows


def sample_from_rows(timestamp: float, rows: list[tuple[str, float]]) -> ResourceSample:
    """Inverse of :func:`sample_rows` (unknown names are skipped)."""
    host_attr = {name: attr for attr, name in HOST_SERIES.items()}
    gpu_attr = {name: attr for attr, name in GPU_SERIES.items()}
    host: dict[str, Any] = {}
    gpus: dict[int, dict[str, float]] = {}
    for metric, value in rows:
        name, _, device = metric.partition("/")
        if device and name in gpu_attr:
            gpus.setdefault(int(device), {})[gpu_attr[name]] = value
        elif name in host_attr:
            host[host_attr[name]] = int(value) if name == "workers" else value
    readings = [GpuReading(index=i, **f) for i, f in sorted(gpus.items())]
    return ResourceSample(timestamp=timestamp, gpus=readings, **host)


class Probe(Protocol):
    """Something that takes one resource sample (``SystemProbe``, a replay, a fake)."""

    def sample(self) -> ResourceSample: ...
    def describe(self) -> dict[str, Any]: ...


class _Series:
    __slots__ = ("down", "stats")

    def __init__(self, capacity: int) -> None:
        self.down = Downsampler(capacity, width=1)
        self.stats = RunningStats()


class ResourceMonitor:
    """Samples resources every ``interval_s`` seconds on a daemon thread.

    Args:
        interval_s: seconds between samples (``resource_interval`` in a monitor's settings).
        probe: what one sample reads; ``SystemProbe()`` (this machine) by default.
        on_sample: receives every recorded sample (on the sampler's thread).
        downsample_capacity: most points per series kept in memory.
        clock: wall clock for timestamps and scheduling (seconds).
        on_tick: called on the sampler's thread after each sample (an error is logged once).
    """

    def __init__(
        self,
        interval_s: float = 1.0,
        *,
        probe: Probe | None = None,
        on_sample: Callable[[ResourceSample], None] | None = None,
        downsample_capacity: int = 2048,
        clock: Callable[[], float] = time.time,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        if not interval_s > 0:
            raise ConfigError(f"resource interval must be > 0 seconds, got {interval_s!r}")
        self.interval_s = float(interval_s)
        self._probe = probe
        self._owns_probe = probe is None
        self._on_sample = on_sample
        self._on_tick = on_tick
        self._tick_failed = False
        self._capacity = downsample_capacity
        self._clock = clock
        self._series: dict[str, _Series] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.samples_taken = 0
        self.errors = 0
        self.sampler_cpu_s = 0.0
        self._started_at: float | None = None
        self._stopped_at: float | None = None

    @property
    def probe(self) -> Probe:
        """The probe, created on first use (so constructing a monitor reads no hardware)."""
        if self._probe is None:
            from codedag.monitor.system import SystemProbe

            self._probe = SystemProbe()
        return self._probe

    @property
    def running(self) -> bool:
        """Whether the sampler thread is alive."""
        return self._thread is not None and self._thread.is_alive()

    def start(self) -> None:
        """Prime the counters and start sampling (no-op when already running)."""
        if self.running:
            return
        self._stop.clear()
        self._started_at = self._clock()
        self._stopped_at = None
        self.sample_now(record=False)  # rates need a previous reading
        self._thread = threading.Thread(target=self._loop, name="codedag-resources", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and take a last sample covering the final partial interval."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stop.set()
        thread.join(timeout=max(5.0, 2 * self.interval_s))
        if thread.is_alive():  # pragma: no cover - a probe hung in a driver call
            log.warning("resource sampler did not stop within its timeout; leaving it (daemon)")
        else:
            self.sample_now()
            if self._owns_probe and hasattr(self._probe, "close"):
                self._probe.close()  # type: ignore[union-attr]
                self._probe = None
        self._stopped_at = self._clock()

    def _loop(self) -> None:
        next_at = self._clock() + self.interval_s
        while not self._stop.wait(max(0.0, next_at - self._clock())):
            self.sample_now()
            self._tick()
            next_at += self.interval_s
            now = self._clock()
            if next_at < now:  # fell behind (suspended, slow probe): skip, don't burst
                next_at = now + self.interval_s

    def _tick(self) -> None:
        if self._on_tick is None:
            return
        try:
            self._on_tick()
        except Exception as error:  # never stop sampling; the caller's next fold retries
            level = logging.DEBUG if self._tick_failed else logging.WARNING
            self._tick_failed = True
            log.log(level, "the sampler's periodic callback failed: %s", error)

    def sample_now(self, record: bool = True) -> ResourceSample | None:
        """Take one sample now; errors are logged (first one as a warning) and counted."""
        cpu0 = time.thread_time()  # this thread's CPU: the sampler's own cost
        try:
            sample = self.probe.sample()
            if record:
                self.record(sample)
        except Exception as error:  # a flaky driver must never stop training
            self.errors += 1
            level = logging.WARNING if self.errors == 1 else logging.DEBUG
            log.log(level, "resource sample failed: %s", error)
            sample = None
        self.sampler_cpu_s += time.thread_time() - cpu0
        return sample

    def record(self, sample: ResourceSample) -> None:
        """Add a sample to the series (also used by replays and tests)."""
        ts = round(sample.timestamp, 3)
        rows = sample_rows(sample)
        with self._lock:
            self.samples_taken += 1
            for name, value in rows:
                series = self._series.get(name)
                if series is None:
                    series = self._series[name] = _Series(self._capacity)
                series.down.add(ts, value)
                series.stats.add(value)
        if self._on_sample is not None:
            self._on_sample(sample)

    def usage(self) -> dict[str, Any]:
        """The results' ``resource_usage``: host series as ``[[ts, v]]``, GPU ones per device id."""
        out: dict[str, Any] = {name: [] for name in HOST_SERIES.values()}
        for name in GPU_SERIES.values():
            out[name] = {}
        with self._lock:
            for key, series in sorted(self._series.items()):
                points = [[p[0], p[1]] for p in series.down.points()]
                name, _, device = key.partition("/")
                if device:
                    out[name][device] = points
                else:
                    out[name] = points
        return out

    def summary(self) -> dict[str, Any]:
        """Mean and max of each series, sample count, sampler CPU use, probe description."""
        with self._lock:
            series = {
                key: {"mean": s.stats.mean, "max": s.stats.max, "count": s.stats.count}
                for key, s in sorted(self._series.items())
                if s.stats.count
            }
            strides = {key: s.down.stride for key, s in self._series.items()}
        end = self._stopped_at if self._stopped_at is not None else self._clock()
        wall = end - self._started_at if self._started_at is not None else 0.0
        cpu = self.sampler_cpu_s
        return {
            "interval_s": self.interval_s,
            "samples": self.samples_taken,
            "errors": self.errors,
            "series": series,
            "max_stride": max(strides.values(), default=1),
            "sampler_cpu_s": cpu,
            "sampler_cpu_pct": 100.0 * cpu / wall if wall > 0 else 0.0,
        }

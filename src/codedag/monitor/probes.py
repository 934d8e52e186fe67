"""What one resource sample reads: CPU and memory of the process tree, the container, the GPUs.

- **Process tree**: this process plus its children (DataLoader workers), CPU time deltas from
  psutil, as percent of the CPUs this job may use (its quota, else its affinity set), and RSS;
  the children alone are reported too (the workers' CPU and memory, and how many there are).
- **Container / host**: inside a container or under a CPU quota, psutil's host-wide numbers are
  wrong for the job, so CPU comes from the cgroup usage counter (v1 ``cpuacct.usage``, v2
  ``cpu.stat``) as percent of the quota, and memory from the cgroup usage against its limit.
  Elsewhere, host-wide CPU and memory from psutil.
- **GPUs**: through the ``GPUs`` interface of ``codedag.devices.gpus`` (``EmptyGPUs``
  when there is no GPU or no NVML).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

import psutil

log = logging.getLogger(__name__)

MB = 1024 * 1024


@dataclass(frozen=True)
class GpuReading:
    """One GPU at one instant; ``None`` where the device does not report a figure."""

    index: int
    util_pct: float | None = None
    memory_used_mb: float | None = None
    power_w: float | None = None
    temperature_c: float | None = None
    energy_j: float | None = None  # NVML's energy counter since the probe started


@dataclass(frozen=True)
class ResourceSample:
    """One resource sample. Percentages of CPU are of the job's CPU capacity (0-100)."""

    timestamp: float
    cpu_pct: float | None = None
    memory_pct: float | None = None
    memory_used_mb: float | None = None
    process_cpu_pct: float | None = None
    process_memory_mb: float | None = None
    gpus: list[GpuReading] = field(default_factory=list)
    workers_cpu_pct: float | None = None  # the child processes (DataLoader workers) alone
    workers_memory_mb: float | None = None
    workers: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ResourceSample:
        """Inverse of :meth:`to_dict`."""
        gpus = [GpuReading(**g) for g in data.get("gpus", [])]
        return cls(**{**data, "gpus": gpus})


class TreeReading(NamedTuple):
    """One reading of a process tree: the whole tree, and its children alone (the workers).

    ``cores`` and ``workers_cores`` are ``None`` on the first read (a rate needs two).
    """

    cores: float | None
    rss_mb: float
    workers_cores: float | None
    workers_rss_mb: float
    workers: int


class ProcessTreeProbe:
    """CPU cores used and RSS of a process and its descendants, from CPU-time deltas."""

    def __init__(self, pid: int | None = None, include_children: bool = True) -> None:
        self.process = psutil.Process(pid if pid is not None else os.getpid())
        self.include_children = include_children
        self._procs: dict[int, psutil.Process] = {}
        self._last_cpu_s: float | None = None
        self._last_workers_cpu_s = 0.0
        self._last_t: float | None = None
        self._dead_cpu_s = 0.0
        self._seen_cpu: dict[tuple[int, float], float] = {}

    def _tree(self) -> list[psutil.Process]:
        procs = [self.process]
        if not self.include_children:
            return procs
        pids = _descendant_pids(self.process.pid)
        if pids is None:  # no /proc/<pid>/task/<tid>/children: psutil scans every process
            with contextlib.suppress(psutil.Error):
                procs += self.process.children(recursive=True)
            return procs
        cache = self._procs
        for pid in pids:
            proc = cache.get(pid)
            if proc is None:
                try:
                    proc = cache[pid] = psutil.Process(pid)
                except psutil.Error:
                    continue
            procs.append(proc)
        for pid in [p for p in cache if p not in pids]:
            del cache[pid]
        return procs

    def read(self, now: float) -> TreeReading:
        """The tree's cores busy since the previous read and RSS, and the same for its children."""
        rss = workers_rss = 0
        alive: dict[tuple[int, float], float] = {}
        root = self.process.pid
        for proc in self._tree():
            try:
                key = (proc.pid, proc.create_time())
                times = proc.cpu_times()
                memory = proc.memory_info().rss
            except psutil.Error:
                continue
            rss += memory
            if proc.pid != root:
                workers_rss += memory
            # own time only: children_user/system would count reaped workers a second time
            alive[key] = times.user + times.system
        # children that exited since the last read keep the CPU time they had then
        for key, cpu in self._seen_cpu.items():
            if key not in alive:
                self._dead_cpu_s += cpu
        self._seen_cpu = alive
        root_cpu = sum(cpu for (pid, _), cpu in alive.items() if pid == root)
        total_cpu = sum(alive.values()) + self._dead_cpu_s
        workers_cpu = total_cpu - root_cpu
        cores = workers_cores = None
        if self._last_cpu_s is not None and self._last_t is not None and now > self._last_t:
            elapsed = now - self._last_t
            cores = max(0.0, (total_cpu - self._last_cpu_s) / elapsed)
            workers_cores = max(0.0, (workers_cpu - self._last_workers_cpu_s) / elapsed)
        self._last_cpu_s, self._last_workers_cpu_s, self._last_t = total_cpu, workers_cpu, now
        workers = sum(1 for pid, _ in alive if pid != root)
        return TreeReading(cores, rss / MB, workers_cores, workers_rss / MB, workers)


def _descendant_pids(pid: int) -> set[int] | None:
    """Descendants from ``/proc/<pid>/task/<tid>/children`` (Linux; ~50x cheaper than psutil's
    scan of every process); ``None`` where that file does not exist."""
    found: set[int] = set()
    todo = [pid]
    while todo:
        current = todo.pop()
        try:
            tids = os.listdir(f"/proc/{current}/task")
        except OSError:
            if current == pid:
                return None
            continue
        for tid in tids:
            try:
                with open(f"/proc/{current}/task/{tid}/children") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except FileNotFoundError:
                if current == pid and not found:
                    return None
                continue
            except (OSError, ValueError):
                continue
            for kid in kids:
                if kid not in found:
                    found.add(kid)
                    todo.append(kid)
    return found


class HostCpuProbe:
    """Host-wide CPU busy percent from ``psutil.cpu_times()`` deltas (no shared global state)."""

    def __init__(self) -> None:
        self._last: tuple[float, float] | None = None

    def read(self) -> float | None:
        """Percent busy since the previous read; ``None`` on the first read."""
        t = psutil.cpu_times()
        idle = t.idle + getattr(t, "iowait", 0.0)
        total = sum(t)
        last, self._last = self._last, (total, idle)
        if last is None or total <= last[0]:
            return None
        busy = (total - last[0]) - (idle - last[1])
        return max(0.0, min(100.0, 100.0 * busy / (total - last[0])))


class CgroupCpuProbe:
    """Container CPU percent of its capacity from a cgroup usage counter in ns."""

    def __init__(self, usage_ns: Callable[[], int | None], capacity_cpus: float) -> None:
        self._usage_ns = usage_ns
        self.capacity_cpus = capacity_cpus
        self._last: tuple[int, float] | None = None

    def read(self, now: float) -> float | None:
        """Percent of ``capacity_cpus`` used since the previous read; ``None`` on the first."""
        usage = self._usage_ns()
        if usage is None:
            return None
        last, self._last = self._last, (usage, now)
        if last is None or now <= last[1]:
            return None
        cores = (usage - last[0]) / 1e9 / (now - last[1])
        return max(0.0, 100.0 * cores / self.capacity_cpus)


def gpu_reading(sample: object, energy_j: float | None = None) -> GpuReading:
    """Convert a sample of the GPUs interface (object or dict) into a :class:`GpuReading`.

    Args:
        sample: one GPU's reading.
        energy_j: the GPU's energy since the probe started, where its counter reads.
    """
    get = sample.get if isinstance(sample, dict) else (lambda k, d=None: getattr(sample, k, d))

    def first(*names: str) -> Any:
        for name in names:
            value = get(name)
            if value is not None:
                return value
        return None

    memory_mb = first("memory_used_mb")
    if memory_mb is None and first("memory_used_bytes") is not None:
        memory_mb = first("memory_used_bytes") / MB
    return GpuReading(
        index=int(first("index") or 0),
        util_pct=first("util_pct", "utilization_pct", "gpu_util_pct"),
        memory_used_mb=memory_mb,
        power_w=first("power_w"),
        temperature_c=first("temperature_c", "temp_c"),
        energy_j=energy_j,
    )

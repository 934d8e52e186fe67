"""SystemProbe: one resource sample of this machine, right inside containers.

Which CPU figure ``cpu_usage`` is, decided once when the probe is built and recorded in
``describe()``:

- in a container, or under a CPU quota, with a readable cgroup usage counter: the cgroup's CPU
  time as percent of its quota (or of the usable CPUs when there is no quota);
- otherwise host-wide CPU busy percent from psutil.

``memory_usage`` is the cgroup's memory (without reclaimable page cache) against its limit in the
same situations, otherwise host memory from psutil. ``process_cpu_usage`` is always the process
tree (this process and its DataLoader workers) as percent of the same CPU capacity, and
``workers_cpu_usage`` / ``workers_memory_mb`` the child processes alone. ``gpu_energy_j`` is each
GPU's energy since the probe was built, from NVML's energy counter where the GPU has one.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import psutil

from codedag.monitor.probes import (
    MB,
    CgroupCpuProbe,
    HostCpuProbe,
    ProcessTreeProbe,
    ResourceSample,
    gpu_reading,
)

log = logging.getLogger(__name__)


class SystemProbe:
    """Reads CPU, memory and GPUs of this process, its container and its devices.

    Args:
        cgroup: a ``CgroupReader`` (fake trees in tests); the process's own by default.
        gpus: a ``GPUs`` implementation; ``open_gpus()`` (NVML or empty) by default.
        in_container: override container detection (``detect_container()`` by default).
        pid: root of the process tree; this process by default.
        include_children: count child processes (DataLoader workers).
        clock: wall clock for timestamps; ``monotonic`` times the rates.
    """

    def __init__(
        self,
        cgroup: Any | None = None,
        gpus: Any | None = None,
        in_container: bool | None = None,
        pid: int | None = None,
        include_children: bool = True,
        clock: Callable[[], float] = time.time,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        from codedag.devices.cgroups import CgroupReader
        from codedag.devices.cpus import usable_cpu_count

        self._clock = clock
        self._monotonic = monotonic
        self.cgroup = cgroup if cgroup is not None else CgroupReader()
        if gpus is None:
            from codedag.devices.gpus import open_gpus

            gpus = open_gpus()
        self.gpus = gpus
        self.container_evidence: list[str] = []
        if in_container is None:
            from codedag.devices.container import detect_container

            info = detect_container()
            in_container, self.container_evidence = info.in_container, list(info.evidence)
        self.in_container = bool(in_container)
        cpu_limit = self.cgroup.cpu_limit()
        mem_limit = self.cgroup.memory_limit()
        self.cpu_limit_cpus: float | None = cpu_limit.cpus
        self.cpu_limit_source: str = cpu_limit.source
        self.capacity_cpus = float(cpu_limit.cpus or usable_cpu_count())
        self.memory_limit_bytes: int | None = mem_limit.limit_bytes
        scoped = self.in_container or cpu_limit.cpus is not None
        self._cgroup_cpu: CgroupCpuProbe | None = None
        if scoped and self.cgroup.cpu_usage_ns() is not None:
            self._cgroup_cpu = CgroupCpuProbe(self.cgroup.cpu_usage_ns, self.capacity_cpus)
        self._host_cpu = HostCpuProbe()
        self._cgroup_memory = (
            scoped or mem_limit.limit_bytes is not None
        ) and self.cgroup.memory_usage_bytes() is not None
        self._tree = ProcessTreeProbe(pid, include_children)
        self._energy_origin_mj = self._energy_mj()

    def _energy_mj(self) -> list[int | None]:
        try:
            return list(self.gpus.energy_mj())
        except Exception as error:  # pragma: no cover - driver trouble
            log.debug("GPU energy counter failed: %s", error)
            return []

    def _energy_j(self) -> list[float | None]:
        """Each GPU's energy since the probe was built (``None`` where no counter reads)."""
        now = self._energy_mj() if any(v is not None for v in self._energy_origin_mj) else []
        out: list[float | None] = []
        for index, value in enumerate(now):
            origin = self._energy_origin_mj[index] if index < len(self._energy_origin_mj) else None
            out.append(
                (value - origin) / 1000.0 if value is not None and origin is not None else None
            )
        return out

    @property
    def cpu_source(self) -> str:
        """Where ``cpu_usage`` comes from, in words."""
        if self._cgroup_cpu is not None:
            return f"cgroup {self.cgroup.version} usage counter / {self.capacity_cpus:g} CPUs"
        return f"host-wide (psutil) / {self.capacity_cpus:g} CPUs"

    @property
    def memory_source(self) -> str:
        """Where ``memory_usage`` comes from, in words."""
        if self._cgroup_memory:
            limit = "its limit" if self.memory_limit_bytes else "host memory (no limit set)"
            return f"cgroup {self.cgroup.version} memory usage / {limit}"
        return "host-wide (psutil virtual_memory)"

    def describe(self) -> dict[str, Any]:
        """What the samples mean: sources, capacities, limits, container evidence, GPUs."""
        infos = []
        try:
            infos = [dict(vars(i)) for i in self.gpus.info()]
        except Exception as error:  # pragma: no cover - driver trouble
            log.debug("GPU info failed: %s", error)
        return {
            "cpu_source": self.cpu_source,
            "cpu_capacity_cpus": self.capacity_cpus,
            "cpu_limit_cpus": self.cpu_limit_cpus,
            "cpu_limit_source": self.cpu_limit_source,
            "memory_source": self.memory_source,
            "memory_limit_mb": self.memory_limit_bytes / MB if self.memory_limit_bytes else None,
            "memory_total_mb": psutil.virtual_memory().total / MB,
            "cgroup_version": self.cgroup.version,
            "in_container": self.in_container,
            "container_evidence": self.container_evidence,
            "gpu_source": getattr(self.gpus, "source", "none"),
            "gpu_reason": getattr(self.gpus, "reason", None),
            "gpus": infos,
        }

    def sample(self) -> ResourceSample:
        """One reading of everything (rates are over the time since the previous call)."""
        now = self._monotonic()
        timestamp = self._clock()
        tree = self._tree.read(now)
        if self._cgroup_cpu is not None:
            cpu_pct = self._cgroup_cpu.read(now)
        else:
            cpu_pct = self._host_cpu.read()
        energy = self._energy_j()
        memory_pct = used_mb = None
        if self._cgroup_memory:
            used = self.cgroup.memory_usage_bytes()
            if used is not None:
                limit = self.memory_limit_bytes or psutil.virtual_memory().total
                used_mb, memory_pct = used / MB, 100.0 * used / limit
        else:
            vm = psutil.virtual_memory()
            used_mb, memory_pct = (vm.total - vm.available) / MB, vm.percent
        return ResourceSample(
            timestamp=timestamp,
            cpu_pct=cpu_pct,
            memory_pct=memory_pct,
            memory_used_mb=used_mb,
            process_cpu_pct=self._pct(tree.cores),
            process_memory_mb=tree.rss_mb,
            workers_cpu_pct=self._pct(tree.workers_cores),
            workers_memory_mb=tree.workers_rss_mb,
            workers=tree.workers,
            gpus=[
                gpu_reading(s, energy[i] if i < len(energy) else None)
                for i, s in enumerate(self.gpus.sample())
            ],
        )

    def _pct(self, cores: float | None) -> float | None:
        return 100.0 * cores / self.capacity_cpus if cores is not None else None

    def close(self) -> None:
        """Release NVML."""
        self.gpus.close()

"""What the container allows a DataLoader: CPUs (the worker ceiling) and memory.

The CPU limit is the smallest of the cgroup's CPU quota, its cpuset and the process's affinity
(:mod:`codedag.devices.cgroups`): ``os.cpu_count()`` in a container reports the host's
cores, and workers beyond the quota only queue for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import psutil

from codedag.devices.cgroups import CgroupReader, container_cpus
from codedag.devices.cpus import cpu_model


@dataclass(frozen=True)
class MachineLimits:
    """CPUs and memory available to this process's container.

    Attributes:
        cpus: CPUs it may use (fractional with a quota such as 1.5).
        cpu_source: where the figure came from (a cgroup file, the cpuset, the affinity mask).
        memory_limit_bytes: the container's memory limit, ``None`` without one.
        available_bytes: memory free for new workers now (limit minus usage, or the host's).
    """

    cpus: float
    cpu_source: str
    memory_limit_bytes: int | None
    available_bytes: int

    @property
    def max_workers(self) -> int:
        """The largest worker count worth trying: one per whole CPU (at least 1)."""
        return max(1, math.floor(self.cpus + 1e-9))


def machine_limits(reader: CgroupReader | None = None) -> MachineLimits:
    """Read the limits (``reader`` is injectable: tests pass a fake cgroup tree)."""
    reader = reader if reader is not None else CgroupReader()
    cpus, source = container_cpus(reader)
    memory = reader.memory_limit()
    if memory.limit_bytes is not None:
        used = reader.memory_usage_bytes() or 0
        available = max(0, memory.limit_bytes - used)
    else:
        available = int(psutil.virtual_memory().available)
    return MachineLimits(cpus, source, memory.limit_bytes, available)


def machine_description(limits: MachineLimits) -> str:
    """CPU model and the CPUs this process may use, for the plan."""
    return f"{cpu_model()}, {limits.cpus:g} CPUs usable"


def as_mb(value: Any) -> float | None:
    """Bytes as MiB (``None`` stays ``None``)."""
    return None if value is None else float(value) / 2**20

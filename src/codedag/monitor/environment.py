"""The environment a run measured on: host, Python, torch, CUDA, GPUs, CPU and memory limits.

Nothing here imports torch or initializes CUDA: torch facts
(:func:`codedag.devices.torch_devices.torch_facts`) come from ``sys.modules`` when the training
script already imported it, else from the installed package's metadata.
"""

from __future__ import annotations

import os
import platform
import socket
from typing import Any

from codedag.devices.cpus import logical_cpu_count
from codedag.devices.torch_devices import torch_facts


def collect_environment(resources: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plain-data description of this process's environment.

    Args:
        resources: a probe's ``describe()`` (CPU/memory sources and limits, container, GPUs),
            merged in under the same keys.
    """
    from codedag.version import __version__

    env: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "codedag": __version__,
        "pid": os.getpid(),
        "cpu_count": logical_cpu_count(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    env.update(torch_facts())
    if resources:
        env.update(resources)
    if "cpu_capacity_cpus" not in env:  # no probe description: read the limits directly
        env.update(_limits())
    return env


def _limits() -> dict[str, Any]:
    """CPU quota and memory limit of this process's cgroup (cheap file reads; never raises)."""
    try:
        from codedag.devices.cgroups import CgroupReader
        from codedag.devices.cpus import usable_cpu_count

        reader = CgroupReader()
        cpu, memory = reader.cpu_limit(), reader.memory_limit()
        return {
            "cpu_capacity_cpus": float(cpu.cpus or usable_cpu_count()),
            "cpu_limit_cpus": cpu.cpus,
            "cpu_limit_source": cpu.source,
            "memory_limit_mb": memory.limit_bytes / 2**20 if memory.limit_bytes else None,
            "cgroup_version": reader.version,
        }
    except Exception as error:  # pragma: no cover - unreadable /proc
        return {"cpu_limit_error": str(error)}

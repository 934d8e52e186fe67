"""The CPUs of this machine: how many there are, how many this process may use, and their model.

A container's quota and cpuset are read by :mod:`codedag.devices.cgroups`; these are the figures
the operating system reports for the whole machine and for this process's affinity.
"""

from __future__ import annotations

import functools
import os
import platform


def logical_cpu_count() -> int:
    """Logical CPUs of the machine (the host's, also inside a container)."""
    return os.cpu_count() or 1


def usable_cpu_count() -> int:
    """CPUs this process may run on (affinity), before any quota."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


@functools.cache
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo``), else what ``platform`` knows, else ``cpu``."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"

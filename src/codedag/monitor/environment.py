"""The environment a run measured on: host, Python, torch, CUDA, GPUs, CPU and memory limits.

Nothing here imports torch or initializes CUDA: torch facts come from ``sys.modules`` when the
training script already imported it, else from the installed package's metadata.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from importlib import metadata
from typing import Any


def _torch_facts() -> dict[str, Any]:
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            version = metadata.version("torch")
        except metadata.PackageNotFoundError:
            version = None
        return {"torch": version, "cuda": None, "cudnn": None, "cuda_in_use": False}
    facts: dict[str, Any] = {
        "torch": getattr(torch, "__version__", None),
        "cuda": getattr(getattr(torch, "version", None), "cuda", None),
        "cudnn": None,
        "cuda_in_use": False,
    }
    try:
        facts["cuda_in_use"] = bool(torch.cuda.is_initialized())
        if facts["cuda_in_use"]:
            facts["cudnn"] = torch.backends.cudnn.version()
            facts["cuda_devices"] = [
                torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
            ]
    except Exception as error:  # pragma: no cover - broken CUDA installs
        facts["cuda_error"] = str(error)
    return facts


def collect_environment(resources: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plain-data description of this process's environment.

    Args:
        resources: a probe's ``describe()`` (CPU/memory sources and limits, container, GPUs),
            merged in under the same keys.
    """
    from codedag import __version__

    env: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "codedag": __version__,
        "pid": os.getpid(),
        "cpu_count": os.cpu_count(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    env.update(_torch_facts())
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


def distributed_rank(environ: dict[str, str] | None = None) -> tuple[int, int]:
    """``(rank, world size)`` from the launcher's variables (torchrun, SLURM, MPI); ``(0, 1)``."""
    env = os.environ if environ is None else environ
    for rank_key, size_key in (
        ("RANK", "WORLD_SIZE"),
        ("SLURM_PROCID", "SLURM_NTASKS"),
        ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
        ("PMI_RANK", "PMI_SIZE"),
    ):
        try:
            size = int(env.get(size_key, "1"))
            if size > 1:
                return int(env.get(rank_key, "0")), size
        except ValueError:
            continue
    return 0, 1


# Variables that name one launch of a distributed job, shared by all of its ranks.
_LAUNCH_VARS = (
    "TORCHELASTIC_RUN_ID",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "OMPI_MCA_orte_jobid",
)


def distributed_launch(environ: dict[str, str] | None = None) -> dict[str, Any] | None:
    """What identifies this process's distributed launch (None outside one).

    ``local_rank`` and the launcher's run identifiers (torchrun's run id and master address,
    SLURM's job and step): ranks of one launch share them, which lets a report find a run's other
    ranks next to one rank's results.
    """
    env = os.environ if environ is None else environ
    rank, world_size = distributed_rank(environ)
    if world_size <= 1:
        return None
    local = env.get("LOCAL_RANK", env.get("SLURM_LOCALID", "")).strip()
    return {
        "rank": rank,
        "world_size": world_size,
        "local_rank": int(local) if local.isdigit() else None,
        "ids": {key: env[key] for key in _LAUNCH_VARS if env.get(key)},
    }

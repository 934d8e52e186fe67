"""This process's place in a distributed launch: its rank, the world size, its local rank.

Launchers say it through environment variables: torchrun (``RANK``, ``WORLD_SIZE``,
``LOCAL_RANK``), SLURM (``SLURM_PROCID``, ``SLURM_NTASKS``, ``SLURM_LOCALID``), Open MPI and other
PMI launchers. Every function takes the environment as an argument (``os.environ`` by default), so
tests pass plain dicts.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

# (rank, world size) variables of each launcher, in the order they are trusted.
_RANK_VARS = (
    ("RANK", "WORLD_SIZE"),
    ("SLURM_PROCID", "SLURM_NTASKS"),
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
    ("PMI_RANK", "PMI_SIZE"),
)

# Variables that name one launch of a distributed job, shared by all of its ranks.
_LAUNCH_VARS = (
    "TORCHELASTIC_RUN_ID",
    "MASTER_ADDR",
    "MASTER_PORT",
    "SLURM_JOB_ID",
    "SLURM_STEP_ID",
    "OMPI_MCA_orte_jobid",
)


def distributed_rank(environ: Mapping[str, str] | None = None) -> tuple[int, int]:
    """``(rank, world size)`` of this process; ``(0, 1)`` outside a distributed launch.

    The first launcher whose world size is above 1 gives both (torchrun, SLURM, Open MPI, PMI).
    Without one, a lone ``RANK`` (then ``LOCAL_RANK``) still names the rank, with a world size of
    1; a value that is not an integer counts as rank 0.
    """
    env = os.environ if environ is None else environ
    for rank_key, size_key in _RANK_VARS:
        try:
            size = int(env.get(size_key, "1"))
            if size > 1:
                return int(env.get(rank_key, "0")), size
        except ValueError:
            continue
    for key in ("RANK", "LOCAL_RANK"):
        value = env.get(key, "").strip()
        if value:
            try:
                return int(value), 1
            except ValueError:
                return 0, 1
    return 0, 1


def local_rank(environ: Mapping[str, str] | None = None) -> int | None:
    """``LOCAL_RANK`` of torchrun-style launchers (this process's GPU on its node), else ``None``."""
    env = os.environ if environ is None else environ
    value = env.get("LOCAL_RANK", "").strip()
    return int(value) if value.isdigit() else None


def distributed_launch(environ: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """What identifies this process's distributed launch (None outside one).

    ``local_rank`` (``LOCAL_RANK``, else SLURM's ``SLURM_LOCALID``) and the launcher's run
    identifiers (torchrun's run id and master address, SLURM's job and step): ranks of one launch
    share them, which lets a report find a run's other ranks next to one rank's results.
    """
    env = os.environ if environ is None else environ
    rank, world_size = distributed_rank(env)
    if world_size <= 1:
        return None
    local = local_rank(env)
    if local is None and "LOCAL_RANK" not in env:
        slurm = env.get("SLURM_LOCALID", "").strip()
        local = int(slurm) if slurm.isdigit() else None
    return {
        "rank": rank,
        "world_size": world_size,
        "local_rank": local,
        "ids": {key: env[key] for key in _LAUNCH_VARS if env.get(key)},
    }


def machine_launch_key(environ: Mapping[str, str] | None = None) -> str:
    """What the ranks of this process's distributed launch on this machine share, ``""`` outside
    one (or when the launcher names no launch).

    The launcher's run identifiers (:func:`distributed_launch`) and the process that started the
    ranks (torchrun's agent, SLURM's step daemon): two launches with the same identifiers (a
    static rendezvous on the same port) differ by it.
    """
    env = os.environ if environ is None else environ
    launch = distributed_launch(env)
    if launch is None or not launch["ids"]:
        return ""
    ids = sorted(launch["ids"].items())
    return ";".join(f"{key}={value}" for key, value in ids) + f";parent={os.getppid()}"

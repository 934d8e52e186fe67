"""This process's rank, world size and local rank from the launchers' variables."""

from __future__ import annotations

import pytest

from codedag.devices.distributed import (
    distributed_launch,
    distributed_rank,
    local_rank,
    machine_launch_key,
)


@pytest.mark.parametrize(
    ("environ", "expected"),
    [
        ({}, (0, 1)),
        ({"RANK": "3", "WORLD_SIZE": "4"}, (3, 4)),
        ({"RANK": "0", "WORLD_SIZE": "1"}, (0, 1)),
        ({"SLURM_PROCID": "3", "SLURM_NTASKS": "4"}, (3, 4)),
        ({"OMPI_COMM_WORLD_RANK": "2", "OMPI_COMM_WORLD_SIZE": "8"}, (2, 8)),
        ({"PMI_RANK": "1", "PMI_SIZE": "2"}, (1, 2)),
        # torchrun under SLURM: torchrun's variables win
        ({"RANK": "5", "WORLD_SIZE": "8", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, (5, 8)),
        # a world size that is not a number: the next launcher is asked
        ({"WORLD_SIZE": "x", "SLURM_PROCID": "1", "SLURM_NTASKS": "2"}, (1, 2)),
        # a lone rank variable still names the rank
        ({"RANK": "3"}, (3, 1)),
        ({"LOCAL_RANK": "2"}, (2, 1)),
        ({"RANK": " 1 ", "LOCAL_RANK": "2"}, (1, 1)),
        ({"RANK": "first"}, (0, 1)),
    ],
)
def test_rank_and_world_size(environ: dict[str, str], expected: tuple[int, int]) -> None:
    assert distributed_rank(environ) == expected


def test_the_process_environment_is_read_by_default(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "2")
    monkeypatch.setenv("WORLD_SIZE", "3")
    monkeypatch.setenv("LOCAL_RANK", "0")
    assert distributed_rank() == (2, 3)
    assert local_rank() == 0


@pytest.mark.parametrize(
    ("environ", "expected"),
    [({}, None), ({"LOCAL_RANK": "3"}, 3), ({"LOCAL_RANK": " 1"}, 1), ({"LOCAL_RANK": "-1"}, None)],
)
def test_local_rank(environ: dict[str, str], expected: int | None) -> None:
    assert local_rank(environ) == expected


def test_distributed_launch_identifies_the_launch() -> None:
    assert distributed_launch({}) is None
    assert distributed_launch({"RANK": "0", "WORLD_SIZE": "1"}) is None
    assert distributed_launch({"RANK": "3"}) is None  # no world size: not a launch
    env = {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_PORT": "29500"}
    assert distributed_launch({**env, "TORCHELASTIC_RUN_ID": "abc"}) == {
        "rank": 3,
        "world_size": 4,
        "local_rank": 1,
        "ids": {"TORCHELASTIC_RUN_ID": "abc", "MASTER_PORT": "29500"},
    }
    slurm = distributed_launch(
        {"SLURM_PROCID": "1", "SLURM_NTASKS": "2", "SLURM_JOB_ID": "77", "SLURM_LOCALID": "1"}
    )
    assert slurm == {"rank": 1, "world_size": 2, "local_rank": 1, "ids": {"SLURM_JOB_ID": "77"}}
    # LOCAL_RANK set but not a number: no local rank, SLURM's is not asked
    odd = distributed_launch({**env, "LOCAL_RANK": "x", "SLURM_LOCALID": "0"})
    assert odd is not None and odd["local_rank"] is None


def test_ranks_of_one_launch_on_one_machine_share_its_key() -> None:
    launch = {"WORLD_SIZE": "2", "TORCHELASTIC_RUN_ID": "abc", "MASTER_PORT": "29500"}
    rank0 = machine_launch_key({**launch, "RANK": "0", "LOCAL_RANK": "0"})
    rank1 = machine_launch_key({**launch, "RANK": "1", "LOCAL_RANK": "1"})
    assert rank0 == rank1 and "TORCHELASTIC_RUN_ID=abc" in rank0
    assert machine_launch_key({**launch, "TORCHELASTIC_RUN_ID": "def", "RANK": "0"}) != rank0
    assert machine_launch_key({}) == ""  # one process: a run of its own
    assert machine_launch_key({"RANK": "0", "WORLD_SIZE": "2"}) == ""  # no launch named

"""``torchrun -m codedag migrate PLAN -- train.py``: every rank patches, counts and writes its own."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from migrate_support import plan_for

from codedag.cli.migrate import rank_suffixed

TRAIN = """
import os
import numpy as np
import torch
import torch.distributed as dist

def main():
    dist.init_process_group("gloo")
    x = np.linspace(-1, 2, 30, dtype=np.float32)
    y = np.clip(x, 0.0, 1.0)
    total = torch.tensor([float(y.sum())])
    dist.all_reduce(total)
    print(f"rank {dist.get_rank()} of {dist.get_world_size()} sum {float(total):.1f}", flush=True)
    dist.destroy_process_group()

if __name__ == "__main__":
    main()
"""


@pytest.mark.slow
def test_every_rank_applies_the_plan_and_keeps_its_own_counters(tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text(TRAIN)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(plan_for({"__main__.main#0/numpy.clip#0": "cpu"})))
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
    command += ["2", "-m", "codedag", "migrate", str(plan), "--stats-out", "stats.json"]
    command += ["--", "train.py"]
    done = subprocess.run(
        command,
        cwd=tmp_path,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "rank 0 of 2 sum 30.0" in done.stdout and "rank 1 of 2 sum 30.0" in done.stdout
    assert "(rank 0 of 2)" in done.stderr and "(rank 1 of 2)" in done.stderr
    assert not (tmp_path / "stats.json").exists()
    for rank in (0, 1):
        stats = json.loads((tmp_path / f"stats.rank{rank}.json").read_text())
        assert (stats["rank"], stats["world_size"]) == (rank, 2)
        assert stats["functions"]["numpy.clip"]["migrated"] == 1
        assert stats["device_map"] == {"cpu": "cpu"}


@pytest.mark.parametrize(
    ("rank", "world", "expected"),
    [(0, 1, "stats.json"), (0, 2, "stats.rank0.json"), (3, 4, "stats.rank3.json")],
)
def test_stats_file_per_rank(rank: int, world: int, expected: str) -> None:
    assert rank_suffixed(Path("out/stats.json"), rank, world) == Path("out") / expected


def test_ranks_beyond_the_gpu_count_share_gpus_the_same_way(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import torch

    import codedag.devices.torch_devices as torch_devices

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 4)
    monkeypatch.setenv("LOCAL_RANK", "5")
    assert torch_devices.default_device() == "cuda:1"
    assert torch_devices.device_for_rank("cuda") == "cuda:1"  # what --device cuda means on rank 5
    assert torch_devices.device_for_rank("cuda:0") == torch_devices.default_device()

"""A scaffolded experiment under ``torchrun --nproc_per_node 2`` (gloo, CPU) with a plan applied:
one results folder per rank, and ``codedag report`` reads the ranks as one run."""

from __future__ import annotations

import contextlib
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from codedag.cli.main import main
from codedag.experiments.scaffold import new_experiment

# Every cv2.resize of the Dataset runs through the torch backend on the CPU (matched by name
# from one traced context key).
RESIZE = (
    "torch.utils.data.dataloader._BaseDataLoaderIter.__next__#0/"
    "baseline.ToyDataset.__getitem__#0/cv2.resize#0"
)


def torchrun(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
         *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip


def codedag(*args: str) -> str:
    """``codedag ARGS`` in-process (one interpreter start less): what it printed."""
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        assert main(list(args)) == 0
    return printed.getvalue()


@pytest.mark.slow
def test_optimization_mode_under_torchrun_and_the_report_of_both_ranks(tmp_path: Path) -> None:
    folder = new_experiment("toy", "pytorch", tmp_path / "experiments").folder
    config = json.loads((folder / "experiment_config.json").read_text())
    config["max_batches_per_epoch"] = 3
    (folder / "experiment_config.json").write_text(json.dumps(config))
    baseline_py = folder / "baseline.py"
    baseline_py.write_text(
        baseline_py.read_text()
        .replace('"num_samples": 128', '"num_samples": 48')
        .replace('"train_batch_size": 16', '"train_batch_size": 8')
    )
    plan = {
        "schema_version": 1,
        "k": 2,
        "gpu_count": 0,
        "target_device": "cpu",
        "partition_device_map": {"0": "cpu", "1": "cpu"},
        "context_device_map": {RESIZE: "cpu"},
        "calls": [],
        "notes": [],
    }
    (folder / "plan.json").write_text(json.dumps(plan))

    run = torchrun("optimization.py", "--modes", "optimization", "--plan", "plan.json", cwd=folder)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-4000:]
    rank_dirs = sorted((folder / "results").glob("toy_optimization_rank*"))
    assert [d.name.split("_")[2] for d in rank_dirs] == ["rank0", "rank1"]
    for rank, run_dir in enumerate(rank_dirs):
        assert f"rank {rank} migration: " in run.stdout
        stats = json.loads((run_dir / "migration_stats_optimization.json").read_text())
        resize = stats["functions"]["cv2.resize"]
        # 24 samples per rank, 3 batches of 8: every resize of this rank's shard went through the
        # wrapper; the run-time check may hand calls back to cv2 once it measured a loss on the CPU
        assert resize["migrated"] >= 1 and resize["fell_back"] == 0
        assert resize["migrated"] + resize["passed_through"] == 24
    for rank, run_dir in enumerate(rank_dirs):
        results = json.loads((run_dir / "results.json").read_text())
        env = results["environment"]
        assert (env["rank"], env["world_size"], env["launch"]["local_rank"]) == (rank, 2, rank)
        summary = results["modes"]["optimization"]["summary"]
        assert summary["num_batches"] == 3 and summary["throughput"]["samples_per_s"] > 0
    ids = [
        json.loads((d / "results.json").read_text())["environment"]["launch"]["ids"]
        for d in rank_dirs
    ]
    assert ids[0] == ids[1] and ids[0]["TORCHELASTIC_RUN_ID"]

    # any rank's folder finds the others; the results folder means its newest run
    data = json.loads(codedag("report", str(rank_dirs[1]), "--json"))
    assert data["world_size"] == 2 and sorted(data["files"]) == ["0", "1"]
    ranks = [r for r in data["ranks"] if r["mode"] == "optimization"]
    assert [r["rank"] for r in ranks] == [0, 1]
    (total,) = data["modes"]
    assert total["ranks"] == [0, 1] and total["num_batches"] == 6
    assert abs(total["samples_per_s"] - sum(r["samples_per_s"] for r in ranks)) < 1e-9
    assert set(total["data_wait_share_pct_by_rank"]) == {"0", "1"}
    slowest = max(ranks, key=lambda r: r["step_mean_s"])
    assert total["slowest_rank"] == slowest["rank"] and total["imbalance"] >= 1.0
    figures = {
        Path(f).relative_to(rank_dirs[0] / "plots_ranks").as_posix() for f in data["figures"]
    }
    assert {"ranks.png", "rank0/batch_time.png", "rank1/summary.png"} <= figures

    table = codedag("report", str(folder / "results"), "--no-plots")
    assert "2 ranks" in table and "all 2" in table
    assert table.count("optimization") >= 3  # rank 0, rank 1 and the aggregate

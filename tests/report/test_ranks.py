"""Multi-rank runs read as one: finding a launch's ranks, the aggregate, the figures."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from codedag.cli.main import main
from codedag.errors import SchemaError
from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.results import load_results
from codedag.report.ranks import (
    aggregate_rows,
    collect_ranks,
    plot_ranks,
    rank_rows,
    results_file,
)


def write_rank(
    root: Path,
    monkeypatch: pytest.MonkeyPatch,
    rank: int,
    world: int,
    port: str,
    step_s: dict[str, float],
    name: str = "exp",
) -> Path:
    """One rank's results as ExperimentMonitor writes them under torchrun (4 batches of 8)."""
    env = {"RANK": str(rank), "WORLD_SIZE": str(world), "LOCAL_RANK": str(rank)}
    env.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=port, TORCHELASTIC_RUN_ID=f"run-{port}")
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monitor = ExperimentMonitor(name, save_dir=root, stream_to_disk=False, flush_interval_s=0)
    for mode, seconds in step_s.items():
        monitor.start_mode(mode, resource_interval=None)
        for _ in range(4):
            monitor.start_batch()
            time.sleep(seconds)
            monitor.end_batch(8)
        monitor.stop_mode()
    path = monitor.save_json()
    for key in env:
        monkeypatch.delenv(key)
    return path


@pytest.fixture
def launch(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[int, Path]:
    """Launch A: rank 1 is the slow one; launch B and a one-process run of it lie beside it."""
    steps = {
        0: {"baseline": 0.004, "optimization": 0.002},
        1: {"baseline": 0.06, "optimization": 0.03},
    }
    paths = {r: write_rank(tmp_path, monkeypatch, r, 2, "1111", steps[r]) for r in (0, 1)}
    time.sleep(1.05)  # run folders are named to the second
    for rank in (0, 1):  # another launch of the same experiment: never mixed in
        write_rank(tmp_path, monkeypatch, rank, 2, "2222", {"baseline": 0.001})
    write_rank(tmp_path, monkeypatch, 0, 1, "0", {"baseline": 0.001})
    return paths


def test_one_rank_finds_the_other_ranks_of_its_launch(launch: dict[int, Path]) -> None:
    assert launch[1].parent.name.startswith("exp_rank1_")
    run = collect_ranks([launch[1]], [load_results(launch[1])])
    assert run is not None and run.world_size == 2
    assert {r: [p.resolve() for p in ps] for r, ps in run.paths.items()} == {
        0: [launch[0].resolve()],
        1: [launch[1].resolve()],
    }
    assert set(run.ranks[0]["modes"]) == {"baseline", "optimization"}


def test_the_aggregate_sums_throughput_and_names_the_slowest_rank(launch: dict[int, Path]) -> None:
    run = collect_ranks([launch[0]], [load_results(launch[0])])
    assert run is not None
    rows = rank_rows(run)
    totals = {t["mode"]: t for t in aggregate_rows(rows)}
    for mode, total in totals.items():
        mine = [r for r in rows if r["mode"] == mode]
        assert total["ranks"] == [0, 1] and total["num_batches"] == 8
        assert total["samples_per_s"] == pytest.approx(sum(r["samples_per_s"] for r in mine))
        assert total["slowest_rank"] == 1 and total["imbalance"] > 2.0
        assert total["step_mean_s"] == max(r["step_mean_s"] for r in mine)
        assert set(total["data_wait_share_pct_by_rank"]) == {0, 1}
    base, opt = totals["baseline"], totals["optimization"]
    assert base["is_baseline"] and base["speedup"] == 1.0
    assert opt["speedup"] == pytest.approx(opt["samples_per_s"] / base["samples_per_s"])
    assert opt["speedup"] > 1.0


def test_one_process_results_are_not_a_multi_rank_run(tmp_path: Path, launch: dict) -> None:
    single = next(p for p in tmp_path.glob("exp_2*/results.json"))
    assert collect_ranks([single], [load_results(single)]) is None


def test_a_folder_of_runs_means_its_newest_run(tmp_path: Path, launch: dict) -> None:
    os.utime(launch[0], (time.time() + 10, time.time() + 10))
    assert results_file(tmp_path) == launch[0]
    assert results_file(launch[0].parent) == launch[0]
    assert results_file(launch[0]) == launch[0]
    (tmp_path / "empty").mkdir()
    with pytest.raises(SchemaError, match=r"no results\.json"):
        results_file(tmp_path / "empty")


@pytest.mark.slow
def test_report_figures_and_table_of_a_multi_rank_run(
    launch: dict[int, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = collect_ranks([launch[0]], [load_results(launch[0])])
    assert run is not None
    figures = plot_ranks(run, tmp_path / "figs")
    names = {p.relative_to(tmp_path / "figs").as_posix() for p in figures}
    assert {"ranks.png", "rank0/summary.png", "rank1/batch_time.png"} <= names
    assert (tmp_path / "figs" / "ranks.png").stat().st_size > 10_000
    capsys.readouterr()
    assert main(["report", str(launch[1].parent), "--no-plots"]) == 0
    out = capsys.readouterr().out
    assert "2 ranks" in out and "all 2" in out and "rank 1 (" in out

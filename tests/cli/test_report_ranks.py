"""``codedag report`` of a multi-rank run: every rank's row, the aggregate, JSON output."""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import pytest

import codedag.cli._report_ranks as report_ranks
from codedag.cli.output import figure
from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.results import load_results
from codedag.report.ranks import RankedRun


def _rank(folder: Path, step_s: float) -> Path:
    monitor = ExperimentMonitor("ranks", run_dir=folder, flush_interval_s=0, stream_to_disk=False)
    for mode in ("baseline", "optimization"):
        monitor.start_mode(mode, resource_interval=None)
        for _ in range(3):
            monitor.start_batch()
            time.sleep(step_s)
            monitor.end_batch(8)
        monitor.stop_mode()
    return monitor.save_json()


@pytest.fixture(name="run", scope="module")
def run_fixture(tmp_path_factory: pytest.TempPathFactory) -> RankedRun:
    root = tmp_path_factory.mktemp("ranks")
    paths = {0: _rank(root / "r0", 0.0), 1: _rank(root / "r1", 0.01)}
    return RankedRun(
        {r: load_results(p) for r, p in paths.items()}, {r: [p] for r, p in paths.items()}
    )


def _args(**extra: object) -> argparse.Namespace:
    return argparse.Namespace(**{"baseline": "baseline", "no_plots": True, "out": None,
                                 "json": False, **extra})  # fmt: skip


def test_format_of_missing_and_scaled_values() -> None:
    assert figure(None) == "-"
    assert figure(0.0123, 1e3) == "12.30"
    assert figure(2, digits=1, suffix="x") == "2.0x"


def test_json_lists_every_rank_and_the_aggregate(
    run: RankedRun, capsys: pytest.CaptureFixture[str]
) -> None:
    assert report_ranks.report_ranks(_args(json=True), run) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["experiment_name"] == "ranks" and payload["world_size"] == 2
    assert sorted(payload["files"]) == ["0", "1"]
    assert [m["mode"] for m in payload["modes"]] == ["baseline", "optimization"]
    assert all(m["slowest_rank"] == 1 for m in payload["modes"])
    assert sorted((r["mode"], r["rank"]) for r in payload["ranks"]) == [
        ("baseline", 0), ("baseline", 1), ("optimization", 0), ("optimization", 1)
    ]  # fmt: skip
    assert payload["figures"] == []


def test_the_table_marks_the_slowest_rank_and_sums_the_ranks(
    run: RankedRun, capsys: pytest.CaptureFixture[str]
) -> None:
    assert report_ranks.report_ranks(_args(), run) == 0
    out = capsys.readouterr().out
    assert "ranks: 2 ranks" in out
    assert "baseline (ref)" in out and out.count("all 2") == 2
    assert out.count("rank 1 (") == 2
    assert "speedup = summed throughput over the" in out
    assert "figures in" not in out

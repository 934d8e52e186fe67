"""Results recomputed from the raw CSV streams (a run killed between two JSON flushes)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from monitor_helpers import CountingProbe

from codedag.cli.main import main
from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.rebuild import rebuild_results


def killed_run(tmp_path: Path) -> ExperimentMonitor:
    """3 batches in the last JSON, 300 in the CSV streams when the process "died"."""
    monitor = ExperimentMonitor(
        "killed", run_dir=tmp_path, flush_interval_s=3600, probe_factory=CountingProbe
    )
    monitor.start_mode("baseline", config={"lr": 0.1}, resource_interval=30.0)
    for b in range(300):
        monitor.start_batch()
        monitor.end_batch(16)
        monitor.log_loss(0, b, 1.0 / (b + 1))
        if b == 2:
            monitor.flush()  # the last JSON the process wrote
    current = monitor._current
    assert current is not None
    current.resources.sample_now()  # type: ignore[union-attr]
    current.timer.fold()
    current.metrics.fold()
    for sink in monitor.sinks:
        sink.flush()  # what the OS had when the process was killed
    return monitor


def test_rebuild_recovers_what_the_stale_json_lacks(tmp_path: Path) -> None:
    monitor = killed_run(tmp_path)
    stale = json.loads(monitor.results_path.read_text())["modes"]["baseline"]
    assert stale["summary"]["num_batches"] == 3
    rebuilt = rebuild_results(tmp_path)["modes"]["baseline"]
    summary = rebuilt["summary"]
    assert summary["num_batches"] == 300 and rebuilt["config"] == {"lr": 0.1}
    assert rebuilt["status"] == "running"  # the JSON's last word is kept, not invented
    assert summary["loss"]["final"] == pytest.approx(1.0 / 300)
    assert summary["loss"]["count"] == 300
    assert rebuilt["resource_usage"]["gpu_usage"]["1"]  # the sample taken after the flush
    small = rebuild_results(monitor.results_path, downsample_capacity=8)["modes"]["baseline"]
    assert len(small["batch_times"]) <= 9 and small["downsampling"]["batch_times"] > 1
    monitor.stop_mode()
    final = json.loads(monitor.results_path.read_text())["modes"]["baseline"]["summary"]
    again = rebuild_results(tmp_path)["modes"]["baseline"]["summary"]
    assert again["batch_time"]["mean"] == pytest.approx(final["batch_time"]["mean"], rel=1e-6)
    assert again["data_wait"]["share_pct"] == pytest.approx(
        final["data_wait"]["share_pct"], rel=1e-6
    )


def test_report_rebuild_flag(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    monitor = killed_run(tmp_path)
    path = str(monitor.results_path)
    assert main(["report", path, "--no-plots", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["modes"][0]["num_batches"] == 3
    assert main(["report", path, "--no-plots", "--json", "--rebuild"]) == 0
    assert json.loads(capsys.readouterr().out)["modes"][0]["num_batches"] == 300
    monitor.stop_mode()


def test_modes_without_csv_keep_their_json(tmp_path: Path) -> None:
    monitor = ExperimentMonitor("nocsv", run_dir=tmp_path, stream_to_disk=False)
    monitor.start_mode("baseline", resource_interval=None)
    monitor.start_batch()
    monitor.end_batch()
    monitor.stop_mode()
    saved = json.loads(monitor.results_path.read_text())["modes"]["baseline"]
    assert rebuild_results(tmp_path)["modes"]["baseline"]["summary"] == saved["summary"]

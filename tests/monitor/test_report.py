"""Plots for one and two modes, the comparison rows, codedag report, replay and the callback."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

from codedag.cli.main import main
from codedag.monitor.callbacks import MonitorCallback
from codedag.monitor.compare import compare_modes
from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.plots import plot_results
from codedag.monitor.probes import GpuReading, ResourceSample
from codedag.monitor.replay import ReplayGPUs, ReplayProbe
from codedag.monitor.resources import ResourceMonitor

FIGURES = {
    "batch_time.png", "cpu.png", "memory.png", "gpu_util.png", "gpu_memory.png", "loss.png",
    "accuracy.png", "summary.png",
}  # fmt: skip


class GpuProbe:
    def __init__(self) -> None:
        self.n = 0

    def sample(self) -> ResourceSample:
        self.n += 1
        gpus = [GpuReading(i, 10.0 * self.n + i, 100.0 * i, 50.0, 40.0) for i in range(2)]
        return ResourceSample(time.time() + self.n, 30.0, 20.0, 100.0, 10.0, 50.0, gpus)

    def describe(self) -> dict[str, str]:
        return {"cpu_source": "fake"}


def _results(tmp_path: Path, modes: dict[str, float]) -> ExperimentMonitor:
    """Each mode waits ``wait_s`` of fake data time per batch (fake clock inside the timer)."""
    monitor = ExperimentMonitor("cmp", tmp_path, probe_factory=GpuProbe)
    for name, wait in modes.items():
        monitor.start_mode(name, resource_interval=60.0)
        timer = monitor._current.timer  # type: ignore[union-attr]
        clock = [0.0]
        timer._clock = lambda clock=clock: clock[0]
        timer.start()
        for i in range(20):
            clock[0] += wait
            monitor.start_batch()
            clock[0] += 0.010
            monitor.end_batch(n_samples=32)
            monitor.log_loss(0, i, 1.0 / (i + 1) + wait)
            monitor.log_accuracy(0, i, 0.5 + i / 100)
        monitor._current.resources.sample_now()  # type: ignore[union-attr]
        monitor.stop_mode()
    return monitor


def test_comparison_rows(tmp_path: Path) -> None:
    monitor = _results(tmp_path, {"baseline": 0.030, "optimization": 0.010})
    rows = {r["mode"]: r for r in compare_modes(monitor.to_dict())}
    assert rows["baseline"]["is_baseline"] and rows["baseline"]["speedup"] == pytest.approx(1.0)
    # medians from the quantile histogram: within 0.5 % each
    assert rows["optimization"]["speedup"] == pytest.approx(2.0, rel=0.01)
    assert rows["optimization"]["difference"] == "faster"
    assert rows["optimization"]["batch_speedup"] == pytest.approx(1.0)
    assert rows["baseline"]["data_wait_share_pct"] == pytest.approx(75.0)
    assert rows["optimization"]["loss_delta"] == pytest.approx(-0.02)
    assert rows["optimization"]["accuracy_delta"] == pytest.approx(0.0)
    assert rows["optimization"]["samples_per_s"] == pytest.approx(1600.0)


@pytest.mark.parametrize("modes", [{"baseline": 0.02}, {"baseline": 0.03, "optimization": 0.01}])
def test_plots_render(tmp_path: Path, modes: dict[str, float]) -> None:
    monitor = _results(tmp_path, modes)
    paths = monitor.plot_metrics()
    assert {p.name for p in paths} == FIGURES
    for path in paths:
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000


def test_plots_without_gpu_or_metrics_still_render(tmp_path: Path) -> None:
    monitor = ExperimentMonitor("bare", tmp_path)
    monitor.start_mode("baseline", resource_interval=None)
    monitor.stop_mode()
    assert {p.name for p in plot_results(monitor.to_dict(), tmp_path / "p")} == FIGURES


def test_cli_report_table_json_and_plots(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monitor = _results(tmp_path, {"baseline": 0.03, "optimization": 0.01})
    path = monitor.save_json()
    assert main(["report", str(path), "--out", str(tmp_path / "figs")]) == 0
    out = capsys.readouterr().out
    assert "optimization" in out and "2.01x ± 0.00" in out and "75.0%" in out
    assert "(1 warm-up)" in out and "the first 1 batch(es) of each mode left out" in out
    assert {p.name for p in (tmp_path / "figs").iterdir()} == FIGURES
    assert main(["report", str(path), "--json", "--no-plots"]) == 0
    rows = json.loads(capsys.readouterr().out)["modes"]
    assert rows[1]["speedup"] == pytest.approx(2.0, rel=0.01) and rows[1]["warmup_batches"] == 1


def test_cli_report_bad_input_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    assert main(["report", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "codedag report: error:" in err and "Traceback" not in err
    assert main(["report", str(tmp_path / "missing.json")]) == 2


def test_replay_reproduces_saved_series(tmp_path: Path) -> None:
    monitor = _results(tmp_path, {"baseline": 0.01})
    saved = monitor.to_dict()
    replay = ResourceMonitor(1.0, probe=ReplayProbe(saved, "baseline"))
    for _ in range(len(ReplayProbe(saved, "baseline").samples)):
        replay.sample_now()
    assert replay.usage()["gpu_usage"] == saved["modes"]["baseline"]["resource_usage"]["gpu_usage"]
    assert replay.usage()["cpu_usage"] == saved["modes"]["baseline"]["resource_usage"]["cpu_usage"]
    gpus = ReplayGPUs(saved, "baseline")
    assert gpus.count() == 2
    usage = saved["modes"]["baseline"]["resource_usage"]["gpu_usage"]
    assert [s.utilization_pct for s in gpus.sample()] == [usage["0"][0][1], usage["1"][0][1]]


def test_lightning_style_callback(tmp_path: Path) -> None:
    import torch

    monitor = ExperimentMonitor("pl", tmp_path)
    callback = MonitorCallback(monitor, mode="baseline", resource_interval=None)
    trainer = SimpleNamespace(current_epoch=0, callback_metrics={"train_acc": torch.tensor(0.75)})
    callback.on_train_start(trainer, None)
    for i in range(3):
        callback.on_train_batch_start(trainer, None, None, i)
        callback.on_train_batch_end(trainer, None, {"loss": torch.tensor(1.5)}, None, i)
    callback.on_validation_start(trainer, None)
    callback.on_validation_end(trainer, None)
    callback.on_train_end(trainer, None)
    data = json.loads(monitor.results_path.read_text())["modes"]["baseline"]
    assert data["summary"]["num_batches"] == 3
    assert data["summary"]["loss"]["final"] == 1.5
    assert data["summary"]["accuracy"]["final"] == 0.75
    assert data["status"] == "completed"


def test_cli_report_accepts_the_run_folder(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    monitor = _results(tmp_path, {"baseline": 0.01})
    monitor.save_json()
    assert main(["report", str(monitor.run_dir), "--no-plots", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["modes"][0]["mode"] == "baseline"

"""The monitor's sinks: every record as data, failures isolated, names and windows."""

from __future__ import annotations

import logging
import math
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from monitor_helpers import CountingProbe, FailingSink, RecordingSink

from codedag.devices.fake_nvml import FakeGPU, FakeNVML
from codedag.devices.gpus import NvmlGPUs
from codedag.errors import ConfigError
from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.probes import ProcessTreeProbe
from codedag.monitor.records import MetricRecord, RunInfo, StepRecord
from codedag.monitor.sinks import names
from codedag.monitor.sinks.base import Sink, SinkHub
from codedag.monitor.sinks.mlflow import MlflowSink, run_store
from codedag.monitor.sinks.specs import make_sinks
from codedag.monitor.sinks.window import MetricWindow, StepWindow
from codedag.monitor.system import SystemProbe

DOCS = Path(__file__).resolve().parents[2] / "docs" / "monitoring.md"


def run_two_modes(run_dir: Path, *sinks: object, batches: int = 6) -> ExperimentMonitor:
    monitor = ExperimentMonitor(
        "sinks", run_dir=run_dir, probe_factory=CountingProbe, sinks=list(sinks)
    )
    for mode in ("baseline", "optimization"):
        monitor.start_mode(mode, config={"lr": 0.1}, resource_interval=0.005)
        for b in range(batches):
            monitor.start_batch()
            time.sleep(0.001)
            monitor.end_batch(n_samples=4)
            monitor.log_loss(0, b, 1.0 / (b + 1))
            monitor.log_accuracy(0, b, 0.1 * b)
        monitor.stop_mode()
    monitor.save_json()
    return monitor


def test_every_record_reaches_the_sinks_as_data(tmp_path: Path) -> None:
    sink = RecordingSink()
    monitor = run_two_modes(tmp_path, sink)
    assert [r.experiment_name for r in sink.runs] == ["sinks"]
    assert [m.name for m in sink.modes] == ["baseline", "optimization"]
    assert sink.modes[0].cpu_capacity_cpus == 4.0 and sink.modes[0].config == {"lr": 0.1}
    for mode in ("baseline", "optimization"):
        steps = sink.steps[mode]
        assert [s.step for s in steps] == list(range(6))
        assert all(s.samples == 4 and s.batch_time_s >= 0.001 for s in steps)
        assert all(0 <= s.data_wait_share_pct <= 100 for s in steps)
        losses = [m for m in sink.metrics[mode] if m.name == "loss"]
        assert [m.step for m in losses] == list(range(6))  # each value's step
        assert [m.value for m in losses] == pytest.approx([1.0 / (b + 1) for b in range(6)])
        assert sink.resources[mode] and sink.resources[mode][0].cpu_pct is not None
    ends = {e.name: e for e in sink.ends}
    assert ends["baseline"].status == "completed" and ends["baseline"].steps == 6
    figures = ends["baseline"].figures
    assert figures["steps"] == 6 and figures["warmup_steps"] == 1
    assert figures["step_time_mean_s"] > 0.001 and math.isfinite(figures["data_wait_share_pct"])
    assert monitor.results_path in sink.artifacts
    assert sink.closed == 0
    monitor.close()
    monitor.close()
    assert sink.closed == 1


def test_the_csv_streams_keep_their_format(tmp_path: Path) -> None:
    run_two_modes(tmp_path)
    batches = (tmp_path / "baseline.batches.csv").read_text().splitlines()
    assert batches[0] == "batch,time_s,batch_time_s,data_wait_s" and len(batches) == 7
    resources = (tmp_path / "baseline.resources.csv").read_text().splitlines()
    assert resources[0] == "timestamp,metric,value" and ",cpu_usage," in resources[1]
    metrics = (tmp_path / "optimization.metrics.csv").read_text().splitlines()
    assert metrics[0] == "metric,epoch,batch,value" and metrics[1] == "loss,0,0,1.0"


def test_a_failing_sink_is_one_warning_and_the_run_goes_on(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failing, recording = FailingSink("log_steps"), RecordingSink()
    with caplog.at_level(logging.WARNING, logger="codedag.monitor.sinks.base"):
        monitor = run_two_modes(tmp_path, failing, recording)
    warnings = [r for r in caplog.records if "failing sink failed" in r.getMessage()]
    assert len(warnings) == 1 and "the run goes on" in warnings[0].getMessage()
    assert failing.calls == 1 and failing not in monitor.sinks
    assert len(recording.steps["optimization"]) == 6  # the other sinks got everything
    data = monitor.to_dict()["modes"]
    assert data["optimization"]["summary"]["num_batches"] == 6
    assert (tmp_path / "optimization.batches.csv").read_text().count("\n") == 7


def test_sink_names(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog) -> None:
    with pytest.raises(ConfigError, match="unknown sink 'wandb'"):
        make_sinks(["wandb"])
    for module in ("tensorboard", "tensorboard.summary.writer.event_file_writer"):
        monkeypatch.setitem(sys.modules, module, None)  # not installed
    with caplog.at_level(logging.WARNING):
        assert make_sinks(["tensorboard"]) == []
    assert "pip install 'codedag[tensorboard]'" in caplog.text
    sink = RecordingSink()
    assert make_sinks([sink]) == [sink]


SECRET_URI = "http://me:hunter2@tracking:5000"


def test_sink_specs_are_shown_without_credentials(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with pytest.raises(ConfigError) as error:
        make_sinks([f"mlfow:{SECRET_URI}"])
    assert "me:***@tracking" in str(error.value) and "hunter2" not in str(error.value)
    monkeypatch.setitem(sys.modules, "mlflow", None)  # not installed: the sink is left out
    with caplog.at_level(logging.WARNING):
        assert make_sinks([f"mlflow:{SECRET_URI}"]) == []
    assert "mlflow:http://me:***@tracking:5000" in caplog.text and "hunter2" not in caplog.text


def test_a_failing_sinks_error_is_shown_without_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Unreachable(Sink):
        name = "server"

        def flush(self) -> None:
            raise ConnectionError(f"cannot reach {SECRET_URI}")

    with caplog.at_level(logging.WARNING):
        SinkHub([Unreachable()]).flush()
    assert "cannot reach http://me:***@tracking:5000" in caplog.text
    assert "hunter2" not in caplog.text


def test_mlflow_sink_warnings_are_shown_without_credentials(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def refuse(uri: str | None) -> object:
        raise ConnectionError(f"cannot reach {uri}")

    release = threading.Event()

    def stuck(uri: str | None) -> object:
        release.wait(60)
        raise ConnectionError("gone")

    with caplog.at_level(logging.WARNING):
        MlflowSink(SECRET_URI, client_factory=refuse, close_timeout_s=60).close()
        slow = MlflowSink(SECRET_URI, client_factory=stuck, close_timeout_s=0.01)
        slow.close()  # its thread waits for ``release``: the close gives up first
        release.set()
        thread = slow._thread
        assert thread is not None
        thread.join(30)  # its warning is logged here, not after the test has ended
        assert not thread.is_alive()
    assert "the mlflow sink failed (ConnectionError: cannot reach" in caplog.text
    assert "MLflow (http://me:***@tracking:5000) did not take" in caplog.text
    assert "hunter2" not in caplog.text


def test_mlflow_run_store_is_inside_the_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    uri, artifacts = run_store(Path("out") / "run")  # relative: made absolute, never cwd-bound
    assert uri == f"sqlite:///{tmp_path}/out/run/mlflow.db"
    assert artifacts == (tmp_path / "out" / "run" / "mlruns").as_uri()


def test_mlflow_without_a_uri_logs_into_the_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.chdir(tmp_path)
    asked: list[str | None] = []

    def refuse(uri: str | None) -> object:
        asked.append(uri)
        raise ConnectionError("no server in this test")

    MlflowSink(client_factory=refuse).close()  # no run opened: no store is made anywhere
    assert asked == []
    sink = MlflowSink(client_factory=refuse)
    sink.open_run(RunInfo("exp", tmp_path / "out"))
    sink.close()
    assert asked == [run_store(tmp_path / "out")[0]]
    assert sink.artifact_location == (tmp_path / "out" / "mlruns").as_uri()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "http://mlflow:5000")  # the user's choice wins
    sink = MlflowSink(client_factory=refuse)
    sink.open_run(RunInfo("exp", tmp_path / "out"))
    sink.close()
    assert asked[-1] is None and sink.artifact_location is None
    assert os.listdir(tmp_path) == []


def test_step_window_averages_fast_steps_and_keeps_slow_ones() -> None:
    steps = [StepRecord(i, 0.01 * (i + 1), 0.008, 0.002, 4) for i in range(20)]
    every = StepWindow(0.0).add(steps)
    assert [p.step for p in every] == list(range(20))
    assert every[0].values["data_wait_share_pct"] == pytest.approx(20.0)
    assert every[0].values["samples_per_s"] == pytest.approx(400.0)
    window = StepWindow(0.05)
    points = window.add(steps)
    assert [p.step for p in points] == [4, 9, 14, 19]
    assert points[1].values["batch_time_ms"] == pytest.approx(8.0)
    assert window.drain() is None
    slow = [StepRecord(i, 0.2 * (i + 1), 0.15, 0.05, 0) for i in range(3)]
    slow_points = StepWindow(0.1).add(slow)
    assert len(slow_points) == 3 and "samples_per_s" not in slow_points[0].values


def test_metric_window_skips_non_finite_values() -> None:
    rows = [MetricRecord("loss", 0, i, v, i, 0.01 * i) for i, v in enumerate([1.0, math.nan, 3.0])]
    window = MetricWindow(1.0)
    assert window.add(rows) == []
    [(name, point)] = window.drain()
    assert name == "loss" and point.values["loss"] == pytest.approx(2.0) and point.step == 2


def test_every_name_is_in_the_docs() -> None:
    text = DOCS.read_text()
    tables = (names.STEP, names.TRAIN, names.SYSTEM, names.GPU, names.LIMITS)
    missing = [
        name
        for table in tables
        for metric in table.values()
        for name in (metric.tensorboard, metric.mlflow)
        if f"`{name}`" not in text
    ]
    assert not missing, missing


def test_dataloader_workers_are_measured_apart(tmp_path: Path) -> None:
    # children an earlier test left running (a resource tracker) are workers to the probe too
    already = len(ProcessTreeProbe()._tree()) - 1
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        probe = ProcessTreeProbe()
        deadline = time.monotonic() + 10
        while busy.pid not in [p.pid for p in probe._tree()] and time.monotonic() < deadline:
            time.sleep(0.01)
        start = time.monotonic()
        probe.read(start)
        time.sleep(0.4)
        reading = probe.read(time.monotonic())
    finally:
        busy.kill()
        busy.wait()
    assert reading.workers == already + 1 and reading.workers_rss_mb > 1
    # a busy loop on a shared 2-core machine: well above the idle main process
    assert reading.workers_cores is not None and reading.workers_cores > 0.1
    assert reading.cores is not None and reading.cores >= reading.workers_cores
    assert reading.rss_mb > reading.workers_rss_mb


def test_gpu_energy_counts_from_the_probe_start() -> None:
    nvml = FakeNVML([FakeGPU(power_w=200.0), FakeGPU(energy_supported=False)])
    nvml.advance(100.0)  # energy before the run is not the run's
    probe = SystemProbe(gpus=NvmlGPUs(nvml, environ={}), in_container=False)
    nvml.advance(2.0)
    energy = [g.energy_j for g in probe.sample().gpus]
    probe.close()
    assert energy[0] == pytest.approx(400.0) and energy[1] is None

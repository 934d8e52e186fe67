"""The MLflow sink, queried back through ``MlflowClient`` from a local SQLite store."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from monitor_helpers import CountingProbe, RecordingSink

from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.sinks.mlflow import MlflowSink

mlflow_tracking = pytest.importorskip(
    "mlflow.tracking", reason="MLflow is not installed (codedag[mlflow])"
)
pytest.importorskip("sqlalchemy", reason="MLflow's local store needs sqlalchemy (codedag[mlflow])")


@pytest.mark.slow
def test_a_parent_run_and_a_run_per_mode(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)  # MLflow's local store keeps artifacts in ./mlruns
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    recording = RecordingSink()
    sink = MlflowSink(uri, min_interval_s=0.0, send_interval_s=0.2, close_timeout_s=120)
    monitor = ExperimentMonitor(
        "mlflow_test",
        run_dir=tmp_path / "run",
        probe_factory=CountingProbe,
        sinks=[sink, recording],
    )
    for mode in ("baseline", "optimization"):
        monitor.start_mode(
            mode, config={"batch_size": 4, "aug": {"flip": True}}, resource_interval=0.01
        )
        for b in range(5):
            time.sleep(0.002)
            monitor.start_batch()
            monitor.end_batch(n_samples=4)
            monitor.log_loss(0, b, 1.0 / (b + 1))
        time.sleep(0.03)
        monitor.stop_mode("interrupted" if mode == "optimization" else "completed")
    monitor.save_json()
    plan = tmp_path / "migration_plan.json"
    plan.write_text("{}")
    monitor.log_artifact(plan)
    monitor.close()

    client = mlflow_tracking.MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("mlflow_test")
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert set(runs) == {"run", "baseline", "optimization"}
    parent = runs["run"]
    assert parent.info.status == "FINISHED"
    assert runs["baseline"].data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert runs["baseline"].info.status == "FINISHED"
    assert runs["optimization"].info.status == "KILLED"
    params = runs["baseline"].data.params
    assert params["batch_size"] == "4" and params["aug.flip"] == "True"
    assert params["cpu_capacity_cpus"] == "4.0"
    base = runs["baseline"].info.run_id
    share = client.get_metric_history(base, "data_wait_share_pct")
    steps = recording.steps["baseline"]
    assert sorted(m.step for m in share) == [s.step for s in steps]
    assert sorted(share, key=lambda m: m.step)[2].value == pytest.approx(
        steps[2].data_wait_share_pct
    )
    losses = sorted(client.get_metric_history(base, "loss"), key=lambda m: m.step)
    assert [m.value for m in losses] == pytest.approx([1.0 / (b + 1) for b in range(5)])
    cpu = client.get_metric_history(base, "system/cpu_pct")
    assert len(cpu) == len(recording.resources["baseline"])
    assert client.get_metric_history(base, "system/gpu_1_utilization_pct")
    assert runs["baseline"].data.metrics["summary/steps"] == 5
    artifacts = {a.path for a in client.list_artifacts(parent.info.run_id, "codedag")}
    assert {"codedag/results.json", "codedag/migration_plan.json"} <= artifacts


def test_an_unreachable_tracking_server_is_one_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_TIMEOUT", "5")
    recording = RecordingSink()
    sink = MlflowSink("http://127.0.0.1:9", send_interval_s=0.05, close_timeout_s=30)
    with caplog.at_level(logging.WARNING):
        monitor = ExperimentMonitor("down", run_dir=tmp_path, sinks=[sink, recording])
        monitor.start_mode("baseline", resource_interval=None)
        for _ in range(3):
            monitor.start_batch()
            monitor.end_batch()
        monitor.stop_mode()
        monitor.close()
    warnings = [r for r in caplog.records if "mlflow sink failed" in r.getMessage()]
    assert len(warnings) == 1, caplog.text
    assert len(recording.steps["baseline"]) == 3  # the other outputs went on
    assert (tmp_path / "results.json").is_file() and (tmp_path / "baseline.batches.csv").is_file()


@pytest.mark.slow
def test_mlflow_without_a_uri_keeps_its_store_in_the_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    run_dir = tmp_path / "out"
    monitor = ExperimentMonitor(
        "local_store", run_dir=run_dir, probe_factory=CountingProbe, sinks=["mlflow"]
    )
    monitor.start_mode("baseline", resource_interval=None)
    for _ in range(3):
        monitor.start_batch()
        monitor.end_batch(n_samples=4)
    monitor.stop_mode()
    monitor.save_json()
    monitor.close()

    assert list(cwd.iterdir()) == []  # neither mlflow.db nor mlruns/ where the run started
    client = mlflow_tracking.MlflowClient(tracking_uri=f"sqlite:///{run_dir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("local_store")
    assert experiment.artifact_location == (run_dir / "mlruns").as_uri()
    runs = {r.info.run_name: r for r in client.search_runs([experiment.experiment_id])}
    assert runs["baseline"].data.metrics["summary/steps"] == 3
    assert list((run_dir / "mlruns").glob("*/artifacts/codedag/results.json"))


@pytest.mark.parametrize("name", ["mlflow.db", "mlruns"])
def test_mlflow_never_writes_its_run_store_through_a_link(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, name: str
) -> None:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    victim = tmp_path / "victim"
    victim.write_bytes(b"")  # an empty file is one SQLite would make a database of
    run_dir = tmp_path / "out"
    run_dir.mkdir()
    (run_dir / name).symlink_to(victim)
    monitor = ExperimentMonitor(
        "linked_store", run_dir=run_dir, probe_factory=CountingProbe, sinks=["mlflow"]
    )
    with caplog.at_level(logging.WARNING):
        monitor.start_mode("baseline", resource_interval=None)
        monitor.start_batch()
        monitor.end_batch(n_samples=4)
        monitor.stop_mode()
        monitor.save_json()
        monitor.close()
    warnings = [r for r in caplog.records if "mlflow sink failed" in r.getMessage()]
    assert len(warnings) == 1 and "symbolic link" in warnings[0].getMessage(), caplog.text
    assert victim.read_bytes() == b"" and (run_dir / name).is_symlink()
    assert (run_dir / "results.json").is_file()  # the run went on

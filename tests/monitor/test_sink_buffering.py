"""Steps and logged values reach the sinks from the sampler's thread, complete and in order."""

from __future__ import annotations

import csv
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from monitor_helpers import CountingProbe, RecordingSink

from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.records import MetricRecord, StepRecord


class ThreadRecordingSink(RecordingSink):
    """A recording sink that also notes the thread each block of steps and values came on."""

    def __init__(self) -> None:
        super().__init__()
        self.step_threads: list[str] = []
        self.metric_threads: list[str] = []

    def log_steps(self, mode: str, steps: Sequence[StepRecord]) -> None:
        self.step_threads.append(threading.current_thread().name)
        super().log_steps(mode, steps)

    def log_metrics(self, mode: str, rows: Sequence[MetricRecord]) -> None:
        self.metric_threads.append(threading.current_thread().name)
        super().log_metrics(mode, rows)


class FakeMlflowClient:
    """Keeps what the MLflow sink sends: metrics by run, in the order they were sent."""

    def __init__(self) -> None:
        self.metrics: dict[str, list[Any]] = {}
        self.runs = 0

    def get_experiment_by_name(self, name: str) -> None:
        return None

    def create_experiment(self, name: str, artifact_location: str | None = None) -> str:
        return "1"

    def create_run(self, experiment_id: str, **kwargs: Any) -> Any:
        self.runs += 1
        return SimpleNamespace(info=SimpleNamespace(run_id=f"run{self.runs}"))

    def log_batch(
        self, run_id: str, metrics: Sequence[Any] = (), params: Sequence[Any] = ()
    ) -> None:
        self.metrics.setdefault(run_id, []).extend(metrics)

    def set_terminated(self, run_id: str, status: str) -> None:
        pass

    def log_artifact(self, run_id: str, path: str, artifact_path: str) -> None:
        pass


def test_steps_written_between_drains_reach_every_sink_in_order(tmp_path: Path) -> None:
    pytest.importorskip("tensorboard", reason="codedag[tensorboard] not installed")
    pytest.importorskip("mlflow.entities", reason="codedag[mlflow] not installed")
    from tensorboard.backend.event_processing import event_accumulator

    from codedag.monitor.sinks.mlflow import MlflowSink
    from codedag.monitor.sinks.tensorboard import TensorBoardSink

    client = FakeMlflowClient()
    recording = ThreadRecordingSink()
    sinks = [
        recording,
        TensorBoardSink(min_interval_s=0.0),
        MlflowSink(min_interval_s=0.0, send_interval_s=0.05, client_factory=lambda uri: client),
    ]
    monitor = ExperimentMonitor(
        "buffered", run_dir=tmp_path, probe_factory=CountingProbe, sinks=sinks
    )
    monitor.start_mode("baseline", resource_interval=0.02)
    steps = 60
    for b in range(steps):
        monitor.start_batch()
        time.sleep(0.002)
        monitor.end_batch(n_samples=2)
        monitor.log_loss(0, b, float(b))
    # the sampler's thread has handed blocks over while the loop ran; the training thread none
    assert set(recording.step_threads) == {"codedag-resources"}
    assert set(recording.metric_threads) == {"codedag-resources"}
    monitor.stop_mode()
    monitor.close()

    assert [s.step for s in recording.steps["baseline"]] == list(range(steps))
    losses = recording.metrics["baseline"]
    assert [m.value for m in losses] == [float(b) for b in range(steps)]
    assert [m.step for m in losses] == list(range(steps))
    ends = [s.time_s for s in recording.steps["baseline"]]
    assert ends == sorted(ends) and [m.time_s for m in losses] == ends  # stamped at the step end
    with open(tmp_path / "baseline.batches.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert [int(r["batch"]) for r in rows] == list(range(steps))

    events = event_accumulator.EventAccumulator(
        str(tmp_path / "tensorboard" / "baseline"), size_guidance={"scalars": 0}
    )
    events.Reload()
    share = events.Scalars("step/batch_time_ms")
    assert [e.step for e in share] == list(range(steps))
    # each point carries its step's own wall time, not the time it was written
    started = recording.modes[0].started_at
    assert [e.wall_time for e in share] == pytest.approx([started + t for t in ends], abs=1e-3)
    assert [e.value for e in events.Scalars("train/loss")] == [float(b) for b in range(steps)]

    [run_id] = [r for r in client.metrics if any(m.key == "loss" for m in client.metrics[r])]
    sent = client.metrics[run_id]
    assert [m.step for m in sent if m.key == "step_time_ms"] == list(range(steps))
    assert [m.value for m in sent if m.key == "loss"] == [float(b) for b in range(steps)]


def test_stop_mode_hands_over_everything_still_buffered(tmp_path: Path) -> None:
    recording = ThreadRecordingSink()
    monitor = ExperimentMonitor(
        "buffered", run_dir=tmp_path, probe_factory=CountingProbe, sinks=[recording]
    )
    monitor.start_mode("baseline", resource_interval=60.0)  # no fold from the sampler meanwhile
    for b in range(500):  # more than a block of 128: the training thread still only appends
        monitor.start_batch()
        monitor.end_batch()
        monitor.log_accuracy(0, b, 0.5)
    assert recording.steps == {} and recording.metrics == {}
    monitor.stop_mode()
    assert [s.step for s in recording.steps["baseline"]] == list(range(500))
    assert [m.batch for m in recording.metrics["baseline"]] == list(range(500))
    assert recording.ends[0].steps == 500
    assert set(recording.step_threads) == {threading.main_thread().name}
    monitor.close()


def test_without_sampling_the_training_thread_folds_in_blocks(tmp_path: Path) -> None:
    recording = ThreadRecordingSink()
    monitor = ExperimentMonitor("buffered", run_dir=tmp_path, sinks=[recording])
    monitor.start_mode("baseline", resource_interval=None)
    for _ in range(300):
        monitor.start_batch()
        monitor.end_batch()
    assert [len(s) for s in [recording.steps["baseline"]]] == [256]  # two blocks of 128
    monitor.stop_mode()
    assert [s.step for s in recording.steps["baseline"]] == list(range(300))
    monitor.close()

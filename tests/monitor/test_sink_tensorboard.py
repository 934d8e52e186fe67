"""The TensorBoard sink, read back with TensorBoard's own reader."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from monitor_helpers import CountingProbe, RecordingSink

from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.sinks.tensorboard import TensorBoardSink

event_accumulator = pytest.importorskip(
    "tensorboard.backend.event_processing.event_accumulator",
    reason="the tensorboard package is not installed (codedag[tensorboard])",
)


def read(folder: Path) -> object:
    accumulator = event_accumulator.EventAccumulator(str(folder), size_guidance={"scalars": 0})
    accumulator.Reload()
    return accumulator


def test_each_mode_is_a_run_with_codedag_figures(tmp_path: Path) -> None:
    recording = RecordingSink()
    monitor = ExperimentMonitor(
        "tb",
        run_dir=tmp_path / "run",
        probe_factory=CountingProbe,
        sinks=[TensorBoardSink(min_interval_s=0.0), recording],
    )
    for mode, pause in (("baseline", 0.004), ("optimization", 0.001)):
        monitor.start_mode(mode, config={"batch_size": 4}, resource_interval=0.01)
        for b in range(8):
            time.sleep(pause)  # the input pipeline
            monitor.start_batch()
            monitor.end_batch(n_samples=4)
            monitor.log_loss(0, b, 2.0 - 0.1 * b)
        time.sleep(0.03)
        monitor.stop_mode()
    monitor.close()
    root = tmp_path / "run" / "tensorboard"
    assert sorted(p.name for p in root.iterdir()) == ["baseline", "optimization"]
    for mode in ("baseline", "optimization"):
        events = read(root / mode)
        tags = set(events.Tags()["scalars"])
        assert {"step/data_wait_share_pct", "step/batch_time_ms", "train/loss"} <= tags
        assert {"system/cpu_pct", "gpu1/utilization_pct", "system/cpu_capacity_cpus"} <= tags
        assert "summary/step_time_mean_s" in tags
        share = events.Scalars("step/data_wait_share_pct")
        steps = recording.steps[mode]
        assert [e.step for e in share] == [s.step for s in steps]  # a point per step here
        assert [e.value for e in share] == pytest.approx(
            [s.data_wait_share_pct for s in steps], rel=1e-5
        )
        assert [e.value for e in events.Scalars("train/loss")] == pytest.approx(
            [2.0 - 0.1 * b for b in range(8)], rel=1e-6
        )
        cpu = events.Scalars("system/cpu_pct")
        assert len(cpu) == len(recording.resources[mode]) and cpu[0].value == pytest.approx(
            recording.resources[mode][0].cpu_pct
        )
        assert "config" in events.Tags()["tensors"]
    baseline = read(root / "baseline").Scalars("step/data_wait_ms")
    optimized = read(root / "optimization").Scalars("step/data_wait_ms")
    assert sum(e.value for e in baseline[1:]) > sum(e.value for e in optimized[1:])


def test_a_given_log_dir_holds_the_run_folder(tmp_path: Path) -> None:
    monitor = ExperimentMonitor(
        "tb", run_dir=tmp_path / "run_7", sinks=[f"tensorboard:{tmp_path / 'logs'}"]
    )
    monitor.start_mode("baseline", resource_interval=None)
    monitor.start_batch()
    monitor.end_batch()
    monitor.stop_mode()
    monitor.close()
    events = read(tmp_path / "logs" / "run_7" / "baseline")
    assert "step/step_time_ms" in events.Tags()["scalars"]

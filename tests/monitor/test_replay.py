"""Reading a saved run back: raw rows, resource samples, metrics, rebuild, ReplayProbe."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from codedag.errors import ConfigError, SchemaError
from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.replay import ReplayMonitor, ReplayProbe, load_run
from codedag.monitor.resources import ResourceMonitor


def test_replay_yields_every_raw_batch_sample_and_metric(two_mode_results: Path) -> None:
    run = load_run(two_mode_results.parent)  # a run folder works as well as the file
    assert run.experiment_name == "unit" and list(run.modes) == ["baseline", "optimization"]
    saved = json.loads(two_mode_results.read_text())["modes"]["baseline"]
    mode = run.mode("baseline")
    assert mode.raw
    batches = list(mode.batches())
    assert [b.index for b in batches] == list(range(12))
    assert [b.batch_time_s for b in batches] == pytest.approx([p[1] for p in saved["batch_times"]])
    assert [b.data_wait_s for b in batches] == pytest.approx(
        [p[1] for p in saved["data_wait_times"]]
    )
    assert all(b.samples == 8 for b in batches)
    assert all(b.time_s is not None and b.time_s > 0 for b in batches)
    samples = list(mode.resource_samples())
    assert len(samples) == saved["summary"]["resources"]["samples"]
    assert samples[0].cpu_pct == 20.0  # the probe's priming read (10.0) is not recorded
    assert [g.index for g in samples[0].gpus] == [0, 1]
    assert samples[0].gpus[1].memory_used_mb == 4096.0
    metrics = list(mode.metrics())
    assert sum(m.metric == "loss" for m in metrics) == 12
    assert metrics[0].metric == "loss" and metrics[0].value == pytest.approx(2.0)
    with pytest.raises(ConfigError, match="not in the recorded run"):
        run.mode("nope")


def test_rebuild_from_raw_streams_matches_the_saved_summary(two_mode_results: Path) -> None:
    saved = json.loads(two_mode_results.read_text())
    rebuilt = ReplayMonitor(two_mode_results).rebuild()
    for name in ("baseline", "optimization"):
        a, b = saved["modes"][name]["summary"], rebuilt["modes"][name]["summary"]
        assert b["num_batches"] == a["num_batches"] == 12
        assert b["batch_time"]["mean"] == pytest.approx(a["batch_time"]["mean"], rel=1e-6)
        assert b["data_wait"]["share_pct"] == pytest.approx(a["data_wait"]["share_pct"], rel=1e-6)
        assert b["loss"] == a["loss"] and b["accuracy"] == a["accuracy"]
        assert b["resources"]["series"] == a["resources"]["series"]
        assert b["total_time"] == pytest.approx(a["total_time"])
    assert rebuilt["modes"]["baseline"]["config"] == saved["modes"]["baseline"]["config"]
    small = ReplayMonitor(two_mode_results).rebuild(downsample_capacity=4)
    mode = small["modes"]["baseline"]
    assert len(mode["batch_times"]) <= 5 and mode["downsampling"]["batch_times"] > 1


def test_rebuild_recovers_batches_the_json_never_saw(tmp_path: Path) -> None:
    """A process killed between two JSON flushes: the CSV streams still hold the later batches."""
    monitor = ExperimentMonitor("killed", run_dir=tmp_path, flush_interval_s=3600)
    monitor.start_mode("baseline", resource_interval=None)
    for _ in range(3):
        monitor.start_batch()
        monitor.end_batch()
    monitor.flush()  # last JSON the "killed" process wrote: 3 batches
    for _ in range(5):
        monitor.start_batch()
        monitor.end_batch()
    monitor._current.timer.fold()  # rows reach the CSV in blocks; a kill loses at most one
    monitor._current.spills[0].flush()  # what the OS had when the process died
    stale = ReplayMonitor(tmp_path)
    assert stale.results["modes"]["baseline"]["summary"]["num_batches"] == 3
    assert stale.rebuild()["modes"]["baseline"]["summary"]["num_batches"] == 8
    monitor.stop_mode()


def test_without_csv_files_the_json_series_are_replayed(two_mode_results: Path) -> None:
    for csv_file in two_mode_results.parent.glob("*.csv"):
        csv_file.unlink()
    mode = load_run(two_mode_results).mode("optimization")
    assert not mode.raw
    batches = list(mode.batches())
    assert len(batches) == 12 and batches[0].time_s is None and batches[0].data_wait_s is not None
    assert len(list(mode.metrics())) == 24
    assert next(iter(mode.resource_samples())).gpus[0].util_pct is not None


def test_replay_probe_feeds_a_resource_monitor(two_mode_results: Path) -> None:
    recorded = load_run(two_mode_results).mode("baseline")
    probe = recorded.probe()
    monitor = ResourceMonitor(60.0, probe=probe)
    for _ in range(len(probe.samples)):
        monitor.sample_now()
    assert monitor.usage()["cpu_usage"] == recorded.data["resource_usage"]["cpu_usage"]
    assert probe.describe()["replay"] is True
    assert monitor.sample_now() is None and monitor.errors == 1  # exhausted: counted, not raised
    with pytest.raises(SchemaError, match="exhausted"):
        probe.sample()
    looping = ReplayProbe(probe.samples, loop=True)
    assert [looping.sample() for _ in range(len(probe.samples) + 1)][-1] == probe.samples[0]


def test_replayed_samples_drive_a_new_monitor_run(two_mode_results: Path, tmp_path: Path) -> None:
    recorded = load_run(two_mode_results).mode("optimization")
    samples = list(recorded.resource_samples())
    monitor = ExperimentMonitor(
        "replayed", run_dir=tmp_path / "again", probe_factory=lambda: recorded.probe(loop=True)
    )
    monitor.start_mode("again", resource_interval=30.0)  # primes with sample 0
    monitor.start_batch()
    monitor.end_batch()
    monitor.stop_mode()  # the closing sample is recorded sample 1 (or 0 again when only one)
    usage = monitor.to_dict()["modes"]["again"]["resource_usage"]
    expected = samples[1 % len(samples)]
    assert usage["cpu_usage"] == [[round(expected.timestamp, 3), expected.cpu_pct]]
    assert usage["gpu_memory"]["1"][0][1] == expected.gpus[1].memory_used_mb
    assert monitor.to_dict()["environment"]["replay"] is True

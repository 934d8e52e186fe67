"""ExperimentMonitor: the seed's JSON, interruption safety, bounded memory, old files."""

from __future__ import annotations

import gc
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from codedag.errors import SchemaError
from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.probes import GpuReading, ResourceSample
from codedag.monitor.results import SCHEMA_VERSION, load_results

# The keys of the original results format, which every file keeps.
SEED_TOP_KEYS = ("experiment_name", "timestamp", "datetime", "modes")
SEED_MODE_KEYS = ("config", "batch_times", "resource_usage", "metrics", "summary")
SEED_RESOURCE_KEYS = ("cpu_usage", "memory_usage", "gpu_usage", "gpu_memory")


class FakeProbe:
    """Two GPUs and fixed host numbers; timestamps advance one second per sample."""

    def __init__(self) -> None:
        self.t = time.time()

    def sample(self) -> ResourceSample:
        self.t += 1.0
        gpus = [GpuReading(0, 50.0, 2048.0, 200.0, 60.0), GpuReading(1, 70.0, 4096.0, 250.0, 65.0)]
        return ResourceSample(self.t, 40.0, 30.0, 1000.0, 20.0, 500.0, gpus)

    def describe(self) -> dict[str, object]:
        return {"cpu_source": "fake", "gpus": [{"index": 0}, {"index": 1}]}


def _monitor(tmp_path: Path, **kwargs: object) -> ExperimentMonitor:
    return ExperimentMonitor("exp", tmp_path, probe_factory=FakeProbe, **kwargs)  # type: ignore[arg-type]


def _run_mode(monitor: ExperimentMonitor, mode: str, batches: int = 5) -> None:
    monitor.start_mode(mode, config={"epochs": 1, "batch_size": 32}, resource_interval=30.0)
    for i in range(batches):
        monitor.start_batch()
        monitor.end_batch()
        monitor.log_loss(0, i, 2.5 - 0.1 * i)
        monitor.log_accuracy(0, i, 0.5 + 0.05 * i)
    monitor.stop_mode()


def test_json_has_every_seed_key(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path)
    _run_mode(monitor, "baseline")
    _run_mode(monitor, "optimization")
    data = json.loads(monitor.save_json().read_text())
    for key in SEED_TOP_KEYS:
        assert key in data
    assert isinstance(data["timestamp"], int) and "T" in data["datetime"]
    assert data["schema_version"] == SCHEMA_VERSION
    assert data["environment"]["cpu_source"] == "fake"
    assert list(data["modes"]) == ["baseline", "optimization"]
    mode = data["modes"]["baseline"]
    for key in SEED_MODE_KEYS:
        assert key in mode
    assert mode["config"] == {"epochs": 1, "batch_size": 32}
    assert [p[0] for p in mode["batch_times"]] == [0, 1, 2, 3, 4]
    for key in SEED_RESOURCE_KEYS:
        assert key in mode["resource_usage"]
    assert set(mode["resource_usage"]["gpu_usage"]) == {"0", "1"}
    assert mode["resource_usage"]["gpu_memory"]["1"][0][1] == 4096.0
    assert mode["metrics"]["losses"][0] == [0, 0, 2.5]
    assert mode["metrics"]["accuracies"][-1] == [0, 4, pytest.approx(0.7)]
    summary = mode["summary"]
    assert set(summary["batch_time"]) >= {"mean", "std", "min", "max", "p50", "p95"}
    assert summary["loss"]["initial"] == 2.5
    assert summary["loss"]["final"] == pytest.approx(2.1)
    assert summary["loss"]["min"] == pytest.approx(2.1) and summary["loss"]["max"] == 2.5
    assert summary["accuracy"]["best"] == pytest.approx(0.7)
    assert {"total_time", "data_wait", "throughput"} <= set(summary)
    assert mode["status"] == "completed"
    # every raw row is in the CSV next to the JSON
    lines = (monitor.run_dir / mode["files"]["batches"]).read_text().splitlines()
    assert lines[0] == "batch,time_s,batch_time_s,data_wait_s" and len(lines) == 6
    assert load_results(monitor.results_path)["modes"]["baseline"]["status"] == "completed"


def test_seed_format_file_still_loads(tmp_path: Path) -> None:
    seed = {
        "experiment_name": "BirdCLEF_2023",
        "timestamp": 1705312200,
        "datetime": "2024-01-15T10:30:00",
        "modes": {
            "baseline": {
                "config": {"epochs": 2},
                "batch_times": [[0, 0.15], [1, 0.14], [2, 0.13]],
                "resource_usage": {"cpu_usage": [[1705312200, 45.2]]},
                "metrics": {"losses": [[0, 0, 2.5], [0, 1, 2.3]], "accuracies": [[0, 0, 0.65]]},
                "summary": {"total_time": 120.5, "batch_time": {"mean": 0.145, "std": 0.02}},
            }
        },
    }
    path = tmp_path / "old.json"
    path.write_text(json.dumps(seed))
    data = load_results(path)
    mode = data["modes"]["baseline"]
    assert mode["summary"]["total_time"] == 120.5
    assert mode["summary"]["batch_time"]["mean"] == 0.145  # the writer's own figure is kept
    assert mode["summary"]["batch_time"]["p95"] == 0.15
    assert mode["summary"]["data_wait"] is None  # never measured: not invented
    assert mode["resource_usage"]["gpu_usage"] == {}
    assert mode["summary"]["loss"]["final"] == 2.3


def test_bad_and_newer_files_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    path.write_text(json.dumps({"experiment_name": "x", "modes": {"a": {"batch_times": [1, 2]}}}))
    with pytest.raises(SchemaError, match="batch_times"):
        load_results(path)
    path.write_text(json.dumps({"experiment_name": "x", "modes": {}, "schema_version": 99}))
    with pytest.raises(SchemaError, match="newer"):
        load_results(path)


def test_exception_in_the_loop_leaves_valid_json(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path)
    with pytest.raises(RuntimeError), monitor.mode("baseline", resource_interval=30.0):
        for i in range(3):
            monitor.start_batch()
            monitor.end_batch()
            monitor.log_loss(0, i, 1.0)
        raise RuntimeError("CUDA out of memory")
    data = load_results(monitor.results_path)
    mode = data["modes"]["baseline"]
    assert mode["status"] == "failed" and "out of memory" in mode["error"]
    assert mode["summary"]["num_batches"] == 3


def test_sigint_in_the_loop_leaves_valid_json(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path)
    with pytest.raises(KeyboardInterrupt), monitor.mode("baseline", resource_interval=30.0):
        for i in range(10):
            monitor.start_batch()
            monitor.end_batch()
            if i == 4:
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(1)  # the handler raises KeyboardInterrupt here
    mode = load_results(monitor.results_path)["modes"]["baseline"]
    assert mode["status"] == "interrupted"
    assert mode["summary"]["num_batches"] == 5


_SCRIPT = """
import sys, time
from pathlib import Path
from codedag.monitor.experiment import ExperimentMonitor
monitor = ExperimentMonitor("exp", run_dir=sys.argv[1])
monitor.start_mode("baseline", config={"lr": 0.1}, resource_interval=0.05)
for i in range(100000):
    monitor.start_batch()
    time.sleep(0.001)
    monitor.end_batch()
    monitor.log_loss(0, i, 1.0 / (i + 1))
    if i == 20:
        Path(sys.argv[2]).write_text("running")
    if sys.argv[3] == "raise" and i == 30:
        raise ValueError("bad batch")
"""


@pytest.mark.parametrize("how", ["sigint", "raise"])
def test_seed_style_script_killed_by_sigint_or_exception_leaves_valid_json(
    tmp_path: Path, how: str
) -> None:
    """No context manager: the exit hook records what was measured."""
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(_SCRIPT))
    run_dir, marker = tmp_path / "run", tmp_path / "marker"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(run_dir), str(marker), how],
        stderr=subprocess.PIPE,
        text=True,
    )
    if how == "sigint":
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.02)
        proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode != 0
    data = load_results(run_dir / "results.json")
    mode = data["modes"]["baseline"]
    if how == "sigint":
        assert mode["status"] == "interrupted" and "KeyboardInterrupt" in err
        assert mode["summary"]["num_batches"] >= 21
    else:
        assert mode["status"] == "failed" and mode["error"] == "ValueError: bad batch"
        assert mode["summary"]["num_batches"] == 31
    assert mode["summary"]["loss"]["initial"] == 1.0
    assert (run_dir / "baseline.batches.csv").read_text().count("\n") >= 22


@pytest.mark.slow
def test_a_million_batches_in_bounded_memory(tmp_path: Path) -> None:
    monitor = ExperimentMonitor(
        "long", tmp_path, stream_to_disk=False, downsample_capacity=512, flush_interval_s=0
    )
    monitor.start_mode("baseline", resource_interval=None)
    start_batch, end_batch, log_loss = monitor.start_batch, monitor.end_batch, monitor.log_loss
    gc.collect()
    rss0 = psutil.Process().memory_info().rss
    for i in range(1_000_000):
        start_batch()
        end_batch()
        if i % 10 == 0:
            log_loss(0, i, 1.0)
    gc.collect()
    growth_mb = (psutil.Process().memory_info().rss - rss0) / 2**20
    monitor.stop_mode()
    data = monitor.to_dict()["modes"]["baseline"]
    assert data["summary"]["num_batches"] == 1_000_000
    assert len(data["batch_times"]) <= 513
    assert data["downsampling"]["batch_times"] >= 1_000_000 // 512
    assert len(data["metrics"]["losses"]) <= 513
    # a list of 10^6 (index, time) pairs alone would take > 100 MB
    assert growth_mb < 20, growth_mb


def test_periodic_flush_writes_a_running_mode(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path, flush_interval_s=0.01)
    monitor.start_mode("baseline", resource_interval=None)
    monitor.start_batch()
    monitor.end_batch()
    time.sleep(0.02)
    monitor.start_batch()
    monitor.end_batch()  # triggers the flush
    mode = load_results(monitor.results_path)["modes"]["baseline"]
    assert mode["status"] == "running" and mode["summary"]["num_batches"] == 2
    monitor.stop_mode()


def test_track_wraps_a_loader_and_counts_samples(tmp_path: Path) -> None:
    import torch

    monitor = _monitor(tmp_path)
    loader = [(torch.zeros(8, 3), torch.zeros(8)) for _ in range(4)]
    with monitor.mode("baseline", resource_interval=None):
        seen = sum(1 for _ in monitor.track(loader))
    summary = monitor.to_dict()["modes"]["baseline"]["summary"]
    assert seen == 4 and summary["num_batches"] == 4
    assert summary["throughput"]["samples_per_s"] > 0


def test_nan_loss_is_counted_not_saved(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path)
    monitor.start_mode("baseline", resource_interval=None)
    monitor.log_loss(0, 0, 1.0)
    monitor.log_loss(0, 1, float("nan"))
    monitor.stop_mode()
    data = json.loads(monitor.save_json().read_text())  # strict JSON: no NaN
    assert data["modes"]["baseline"]["summary"]["loss"]["nonfinite"] == 1


def test_repeated_mode_names_get_a_suffix(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path)
    _run_mode(monitor, "baseline", 1)
    _run_mode(monitor, "baseline", 1)
    assert list(monitor.to_dict()["modes"]) == ["baseline", "baseline_2"]


def test_save_json_elsewhere_keeps_csv_paths_resolvable(tmp_path: Path) -> None:
    monitor = _monitor(tmp_path / "runs")
    _run_mode(monitor, "baseline", 2)
    target = monitor.save_json(tmp_path / "out" / "results.json")
    files = json.loads(target.read_text())["modes"]["baseline"]["files"]
    assert (target.parent / files["batches"]).is_file()
    assert monitor.results_path.is_file()


def test_data_wait_of_a_dataloader_with_a_known_sleep(tmp_path: Path) -> None:
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Slow(Dataset):
        def __len__(self) -> int:
            return 8

        def __getitem__(self, i: int) -> torch.Tensor:
            time.sleep(0.01)  # the preprocessing this loader is slow at
            return torch.zeros(3)

    monitor = _monitor(tmp_path)
    with monitor.mode("baseline", resource_interval=None):
        for batch in monitor.track(DataLoader(Slow(), batch_size=2)):
            assert batch.shape == (2, 3)
    summary = monitor.to_dict()["modes"]["baseline"]["summary"]
    assert summary["num_batches"] == 4
    assert summary["data_wait"]["min"] >= 0.02  # two items of 10 ms each, at least
    assert summary["data_wait"]["share_pct"] > 50.0  # the empty loop body is far cheaper
    assert summary["throughput"]["samples_per_s"] is not None


def test_a_second_run_in_the_same_folder_replaces_the_streams_not_extends_them(
    tmp_path: Path,
) -> None:
    import csv

    for batches in (4, 2):  # two runs, one folder
        monitor = ExperimentMonitor("again", run_dir=tmp_path, flush_interval_s=0)
        monitor.start_mode("baseline", resource_interval=None)
        for _ in range(batches):
            monitor.start_batch()
            monitor.end_batch(4)
        monitor.stop_mode()
        monitor.save_json()
    rows = list(csv.DictReader((tmp_path / "baseline.batches.csv").open()))
    results = json.loads((tmp_path / "results.json").read_text())
    assert len(rows) == 2 == results["modes"]["baseline"]["summary"]["num_batches"]

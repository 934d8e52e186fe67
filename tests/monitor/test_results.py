"""The results JSON: the seed's keys, schema_version, environment, data wait; old files load."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from monitor_helpers import original_format_results, record_run

from codedag.errors import SchemaError
from codedag.monitor.results import SCHEMA_VERSION, load_results, upgrade_results

# The seed's §6.1 structure, key for key.
SEED_TOP = {"experiment_name", "timestamp", "datetime", "modes"}
SEED_MODE = {"config", "batch_times", "resource_usage", "metrics", "summary"}
SEED_USAGE = {"cpu_usage", "memory_usage", "gpu_usage", "gpu_memory"}
SEED_SUMMARY = {"total_time", "batch_time", "loss", "accuracy"}


def test_saved_json_has_every_seed_key_and_the_additions(two_mode_results: Path) -> None:
    data = json.loads(two_mode_results.read_text())
    assert set(data) >= SEED_TOP
    assert isinstance(data["timestamp"], int) and isinstance(data["datetime"], str)
    assert data["schema_version"] == SCHEMA_VERSION
    env = data["environment"]
    for key in ("host", "python", "torch", "cuda", "gpus", "cpu_capacity_cpus"):
        assert key in env
    assert list(data["modes"]) == ["baseline", "optimization"]
    for mode in data["modes"].values():
        assert set(mode) >= SEED_MODE
        assert mode["config"] == {"epochs": 2, "batch_size": 8}
        assert mode["status"] == "completed"
        # [[global_batch_idx, seconds]]
        assert [p[0] for p in mode["batch_times"]] == list(range(12))
        assert all(len(p) == 2 and p[1] > 0 for p in mode["batch_times"])
        usage = mode["resource_usage"]
        assert set(usage) >= SEED_USAGE
        assert usage["cpu_usage"] and all(len(p) == 2 for p in usage["cpu_usage"])
        assert set(usage["gpu_usage"]) == {"0", "1"} and set(usage["gpu_memory"]) == {"0", "1"}
        assert usage["gpu_memory"]["1"][0][1] == 4096.0
        losses, accs = mode["metrics"]["losses"], mode["metrics"]["accuracies"]
        assert [p[:2] for p in losses[:7]] == [[0, b] for b in range(6)] + [[1, 0]]
        assert len(accs) == 12 and accs[0] == [0, 0, 0.5]
        summary = mode["summary"]
        assert set(summary) >= SEED_SUMMARY
        assert {"mean", "std", "min", "max"} <= set(summary["batch_time"])
        assert summary["total_time"] >= summary["step_time"]["total"] > 0
        assert {"initial", "final", "min", "max"} <= set(summary["loss"])
        assert summary["loss"]["initial"] == losses[0][2]
        assert summary["accuracy"]["best"] == pytest.approx(0.5 + 0.04 * 11)
        wait = summary["data_wait"]
        assert {"mean", "p50", "p95", "total", "share_pct"} <= set(wait)
        assert 0.0 <= wait["share_pct"] <= 100.0
        assert summary["throughput"]["samples_per_s"] > 0
    assert load_results(two_mode_results)["modes"]["baseline"]["summary"]["num_batches"] == 12


def test_seed_format_file_without_schema_version_loads_with_defaults(tmp_path: Path) -> None:
    old = original_format_results()
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    data = load_results(path)
    mode = data["modes"]["baseline"]
    assert data["schema_version"] == SCHEMA_VERSION and data["environment"] == {}
    assert mode["status"] == "completed" and mode["resource_usage"]["memory_usage"] == []
    summary = mode["summary"]
    assert summary["total_time"] == 120.5
    assert summary["batch_time"]["mean"] == 0.145  # the writer's figure is kept
    assert summary["batch_time"]["p95"] == 0.16  # the missing quantile is computed
    assert summary["data_wait"] is None  # not measured by the old writer: unknown, not zero
    assert summary["loss"] == {"initial": 2.5, "final": 2.3, "min": 2.3, "max": 2.5}
    assert summary["accuracy"]["best"] == 0.65
    assert upgrade_results(old)["modes"]["baseline"]["metrics"]["accuracies"] == [[0, 0, 0.65]]


def test_newer_and_malformed_files_are_refused_with_the_reason(tmp_path: Path) -> None:
    path = record_run(tmp_path / "run", batches=2)
    data = json.loads(path.read_text())
    data["schema_version"] = SCHEMA_VERSION + 1
    with pytest.raises(SchemaError, match="newer"):
        load_results(data)
    data["schema_version"] = SCHEMA_VERSION
    data["modes"]["baseline"]["batch_times"] = [[0]]
    with pytest.raises(SchemaError, match="batch_times"):
        load_results(data)
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(SchemaError, match=r"is not JSON: .* at line 1 column 2"):
        load_results(bad)
    with pytest.raises(SchemaError, match="no such file"):
        load_results(tmp_path / "missing.json")


def test_running_mode_is_flushed_with_status_running(tmp_path: Path) -> None:
    from monitor_helpers import CountingProbe

    from codedag.monitor.experiment import ExperimentMonitor

    monitor = ExperimentMonitor("live", run_dir=tmp_path, probe_factory=CountingProbe)
    monitor.start_mode("baseline", resource_interval=None)
    for _ in range(3):
        monitor.start_batch()
        monitor.end_batch()
    monitor.flush()
    live = load_results(monitor.results_path)
    assert live["modes"]["baseline"]["status"] == "running"
    assert live["modes"]["baseline"]["summary"]["num_batches"] == 3
    assert live["environment"]["cpu_capacity_cpus"] > 0  # limits known without a probe
    monitor.stop_mode()
    assert load_results(monitor.results_path)["modes"]["baseline"]["status"] == "completed"


def test_each_distributed_rank_gets_its_own_run_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codedag.monitor.experiment import ExperimentMonitor

    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    monitor = ExperimentMonitor("ddp", save_dir=tmp_path)
    assert monitor.run_dir.name.startswith("ddp_rank1_")
    env = monitor.to_dict()["environment"]
    assert (env["rank"], env["world_size"]) == (1, 2)


def test_batch_size_is_read_from_tuple_dict_and_tensor_batches() -> None:
    import torch

    from codedag.monitor.mode import batch_size_of as count_samples

    x = torch.zeros(5, 3)
    assert count_samples((x, x), None) == 5
    assert count_samples({"image": x, "label": x[:, 0]}, None) == 5
    assert count_samples(x, None) == 5
    assert count_samples({"ids": [x]}, None) == 5
    assert count_samples("text", None) == 0
    assert count_samples([1, 2], lambda b: len(b)) == 2


def test_files_without_steady_figures_get_them_from_raw_series() -> None:
    from codedag.monitor.compare import compare_modes
    from codedag.monitor.results import load_results

    def mode(first: float, rest: float) -> dict:
        times = [[i, first if i == 0 else rest + 0.001 * (i % 3)] for i in range(10)]
        return {"config": {}, "batch_times": times, "data_wait_times": [[i, 0.01] for i in range(10)],
                "resource_usage": {}, "metrics": {}, "summary": {}}  # fmt: skip

    data = {
        "experiment_name": "old",
        "modes": {"baseline": mode(0.83, 0.24), "optimization": mode(0.83, 0.24)},
    }
    loaded = load_results(data)
    steady = loaded["modes"]["baseline"]["summary"]["steady"]
    assert steady["warmup_batches"] == 1 and steady["num_batches"] == 9
    assert steady["step_time"]["p50"] == pytest.approx(0.251)
    rows = {r["mode"]: r for r in compare_modes(loaded)}
    assert rows["optimization"]["difference"] == "no difference"
    assert rows["optimization"]["speedup"] == pytest.approx(1.0)
    assert rows["baseline"]["step_mean_s"] < 0.26  # the 830 ms warm-up batch is left out

"""The results model: files round-trip unchanged, old files upgrade, bad ones are named, runs merge."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from monitor_helpers import original_format_results, record_run

from codedag.errors import SchemaError
from codedag.monitor.model import ModeResults, ModeSummary, RunResults
from codedag.monitor.results import load_results, merge_results, upgrade_results


def test_a_written_file_loads_and_dumps_to_the_same_json(two_mode_results: Path) -> None:
    text = two_mode_results.read_text()
    results = load_results(two_mode_results)
    assert isinstance(results, RunResults)
    assert results.to_dict() == json.loads(text)
    # the same text: keys in the same order, a batch index stays an int
    assert json.dumps(results.to_dict(), indent=2) + "\n" == text
    assert load_results(results.to_dict()).to_dict() == results.to_dict()


def test_the_original_format_loads_as_todays_upgrade() -> None:
    results = load_results(original_format_results())
    assert results.to_dict() == upgrade_results(original_format_results())
    base = results.modes["baseline"]
    assert base.summary.batch_time is not None and base.summary.batch_time.mean == 0.145
    assert base.summary.data_wait is None and base.summary.steady is None
    assert base.resource_usage.series("gpu_memory") == {"0": [[1705312200, 2048]]}
    assert base.resource_usage.series("cpu_usage") == {"": [[1705312200, 45.2]]}
    assert base.resource_usage.memory_usage == [] and base.status == "completed"
    opt = results.modes["optimization"].summary
    assert opt.num_batches == 2 and opt.data_wait is not None and opt.steady is not None
    assert opt.steady.step_time is not None and opt.steady.step_time.p50 == pytest.approx(0.11)


def test_unknown_keys_survive_the_round_trip() -> None:
    data = original_format_results()
    data["team"] = {"name": "birds"}
    data["modes"]["baseline"]["note"] = "first try"
    data["modes"]["baseline"]["summary"]["batch_time"]["p99"] = 0.18
    data["modes"]["baseline"]["resource_usage"]["fan_rpm"] = [[1705312200, 900]]
    out = load_results(data).to_dict()
    assert out["team"] == {"name": "birds"}
    assert out["modes"]["baseline"]["note"] == "first try"
    assert out["modes"]["baseline"]["summary"]["batch_time"]["p99"] == 0.18
    assert out["modes"]["baseline"]["resource_usage"]["fan_rpm"] == [[1705312200, 900]]


def test_every_part_reads_as_the_json_dict() -> None:
    results = load_results(original_format_results())
    upgraded = upgrade_results(original_format_results())
    assert results == upgraded and results["modes"]["baseline"] == upgraded["modes"]["baseline"]
    summary = results["modes"]["baseline"]["summary"]
    assert summary["batch_time"]["mean"] == 0.145 and summary["data_wait"] is None
    assert set(summary) == set(upgraded["modes"]["baseline"]["summary"])
    assert "steady" not in summary and summary.get("steady", "absent") == "absent"
    with pytest.raises(KeyError):
        summary["steady"]
    assert ModeSummary() == {} and len(ModeSummary()) == 0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda d: d.update(experiment_name=3), "experiment_name: expected a string"),
        (lambda d: d.update(modes=[]), "modes: expected an object, got list"),
        (
            lambda d: d["modes"]["baseline"]["batch_times"].append([3]),
            "modes.baseline.batch_times[3]: expected a list of 2 numbers, got [3]",
        ),
        (
            lambda d: d["modes"]["baseline"]["summary"].update(step_time="fast"),
            "modes.baseline.summary.step_time: expected an object or null",
        ),
        (
            lambda d: d["modes"]["baseline"]["summary"].update(steady={"num_batches": "many"}),
            "modes.baseline.summary.steady.num_batches: expected a whole number, got str",
        ),
        (
            lambda d: d["modes"]["baseline"].update(downsampling={"batch_times": 2.5}),
            "modes.baseline.downsampling.batch_times: expected a whole number, got float",
        ),
        (
            lambda d: d["environment"].update(rank="0"),
            "environment.rank: expected a whole number, got str",
        ),
    ],
)
def test_a_bad_field_is_named_in_one_message(change: object, message: str) -> None:
    data = upgrade_results(original_format_results())
    change(data)  # type: ignore[operator]
    with pytest.raises(SchemaError) as error:
        load_results(data)
    assert str(error.value).startswith("results: not a codedag results file: ")
    assert message in str(error.value)
    assert "\n" not in str(error.value)


def test_merge_keeps_every_mode_and_the_first_runs_fields(tmp_path: Path) -> None:
    first = load_results(record_run(tmp_path / "a", {"baseline": 1.0}, batches=2))
    second = load_results(original_format_results())
    merged = merge_results([first, second])
    assert list(merged.modes) == ["baseline", "baseline@BirdCLEF_2023", "optimization"]
    assert merged.modes["baseline"] is first.modes["baseline"]
    assert merged.experiment_name == f"{first.experiment_name} + BirdCLEF_2023"
    assert merged.environment == first.environment
    assert merged.to_dict()["schema_version"] == first.schema_version
    labelled = merge_results(
        [second, original_format_results()], labels=["x", "y"]
    )  # dicts load as files do
    assert list(labelled.modes) == ["baseline", "optimization", "baseline@y", "optimization@y"]
    assert labelled.experiment_name == "BirdCLEF_2023"
    with pytest.raises(SchemaError, match="at least one"):
        merge_results([])


def test_the_monitor_builds_the_model_it_writes(tmp_path: Path) -> None:
    from codedag.monitor.experiment import ExperimentMonitor

    monitor = ExperimentMonitor("live", run_dir=tmp_path, stream_to_disk=False)
    monitor.start_mode("baseline", resource_interval=None)
    for _ in range(3):
        monitor.start_batch()
        monitor.end_batch(4)
    summary = monitor.stop_mode()
    assert isinstance(summary, ModeSummary) and summary.num_batches == 3
    assert summary["num_batches"] == 3  # reads as the dict stop_mode returned before
    results = monitor.results()
    assert isinstance(results.modes["baseline"], ModeResults)
    assert json.loads(monitor.results_path.read_text()) == results.to_dict()
    assert load_results(monitor.results_path) == results

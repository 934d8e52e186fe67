"""A full disk is one line and exit code 2 for every command that writes, never a traceback; what
was written before stays intact and no partial or temporary file is left.

The folder is a small tmpfs mounted for the test where the machine allows it (see
``disk_support``), else codedag's writes are sent to ``/dev/full``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli_inputs import SCRIPT, assert_one_line_error, make_dag, make_plan, make_results, run_cli
from disk_support import KEPT, full_disk, leftovers


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    dag = make_dag(folder)
    script = folder / "train.py"
    script.write_text(SCRIPT)
    results_db = folder / "energy"
    from codedag.energy.store import ResultsDB

    db = ResultsDB(results_db)
    db.upsert_session("run_1", folder, {"status": "done", "experiment_name": "e"})
    db.add_experiment(
        {"session": "run_1", "experiment_id": "x1", "timestamp": "t", "repository": "r",
         "model": "m", "training_success": True}
    )  # fmt: skip
    return {
        "dag": dag,
        "plan": make_plan(folder, dag),
        "results": make_results(folder),
        "script": script,
        "results_dir": results_db,
    }


@pytest.fixture
def full(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    with full_disk(tmp_path, monkeypatch) as folder:
        yield folder


def _argv(inputs: dict[str, Path], full: Path, command: str) -> list[Any]:
    return {
        "trace": ["trace", "cli_inputs:preprocess", "--out", full / "t", "--format", "json"],
        "trace_dot": ["trace", "cli_inputs:preprocess", "--out", full / "t", "--format", "dot"],
        "optimize": [
            "optimize", inputs["dag"], "--gpus", "0", "--target-device", "cpu",
            "--assume-speedup", "8", "--out", full,
        ],
        "report": ["report", inputs["results"], "--out", full / "plots"],
        "results": ["results", "--results-dir", inputs["results_dir"], "--csv", full / "x.csv"],
        "migrate": [
            "migrate", inputs["plan"], "--stats-out", full / "stats.json", "--", "python",
            inputs["script"],
        ],
    }[command]  # fmt: skip


@pytest.mark.parametrize(
    "command", ["trace", "trace_dot", "optimize", "report", "results", "migrate"]
)
def test_a_full_disk_is_one_line_and_nothing_is_lost(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path], full: Path, command: str
) -> None:
    line = assert_one_line_error(run_cli(capsys, "-q", *_argv(inputs, full, command)))
    assert "No space left on device" in line and "intact" in line, line
    assert (full / "kept.txt").read_bytes() == KEPT
    assert leftovers(full) == []


def test_a_plan_written_before_is_intact_when_optimize_cannot_replace_it(
    capsys: pytest.CaptureFixture[str],
    inputs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    old = {"schema_version": 2, "context_device_map": {}, "notes": ["the earlier plan"]}
    with full_disk(tmp_path, monkeypatch) as full:
        # kept.txt stands for the earlier run's files; the plan is one of them
        (full / "kept.txt").rename(full / "migration_plan.json")
        (full / "migration_plan.json").write_text(json.dumps(old))
        assert_one_line_error(run_cli(capsys, "-q", *_argv(inputs, full, "optimize")))
        assert json.loads((full / "migration_plan.json").read_text()) == old
        assert leftovers(full) == []


@pytest.mark.slow
@pytest.mark.parametrize("command", ["demo", "tune", "profile"])
def test_the_long_commands_too(
    capsys: pytest.CaptureFixture[str], full: Path, command: str, tmp_path: Path
) -> None:
    argv: list[Any] = {
        "demo": [
            "demo", "--batches", "1", "--batch-size", "2", "--workers", "0", "--no-tune",
            "--device", "cpu", "--out", full / "d",
        ],
        "tune": [
            "tune", "loader_fixtures:free_loader", "--plan", full / "plan.json", "--batches", "6",
            "--rounds", "1", "--trial-s", "1", "--max-workers", "0", "--device", "cpu",
        ],
        "profile": [
            "profile", "--scenario", "tiny_ops", "--device", "cpu", "--profile-steps", "2",
            "--warmup-steps", "0", "--batch-size", "4", "--image-size", "32", "--dataset-size",
            "16", "--output_json", full / "m.json",
            "--trace_dir", tmp_path / "traces",
        ],
    }[command]  # fmt: skip
    code, _out, err = run_cli(capsys, "-q", *argv)
    # a run that measures keeps going past a failed autosave (with a warning), then stops at
    # the first file it must write, with one error line
    assert code == 2 and "Traceback" not in err, err
    last = err.strip().splitlines()[-1]
    assert last.startswith(f"codedag {command}: error:") and "No space left" in last, err
    assert (full / "kept.txt").read_bytes() == KEPT
    assert leftovers(full) == []

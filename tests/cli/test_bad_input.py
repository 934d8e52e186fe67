"""Every bad input gets exit code 2 and one line on stderr naming the problem, before any work.

One test (or parametrized case) per problem found by probing every command as a careless or
hostile user would; "nothing already written lost" is checked where a file was in the way.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from cli_inputs import (
    SCRIPT,
    assert_one_line_error,
    make_dag,
    make_models_config,
    make_plan,
    make_results,
    run_cli,
)
from results_db import DAMAGES, damaged_results_db

DEEP = "[" * 200_000 + "]" * 200_000
NOT_UTF8 = b'{"schema_version": 1, "name": "\xff\xfe\xfa"}'


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("inputs")
    dag = make_dag(folder)
    models, settings = make_models_config(folder)
    script = folder / "train.py"
    script.write_text(SCRIPT)
    return {
        "dag": dag,
        "plan": make_plan(folder, dag),
        "results": make_results(folder),
        "models": models,
        "settings": settings,
        "script": script,
    }


def write(path: Path, content: str | bytes) -> Path:
    if isinstance(content, str):
        content = content.encode()
    path.write_bytes(content)
    return path


# ----------------------------------------------------------------- files that are not what they say


def commands_reading(kind: str, path: Path, inputs: dict[str, Path], tmp: Path) -> list[list[Any]]:
    """Every command line that reads a file of ``kind`` given as ``path``."""
    models = ["--models-config", inputs["models"]]
    return {
        "dag": [["optimize", path, "--gpus", "0", "--out", tmp / "o"]],
        "plan": [
            ["plan", "explain", path],
            ["migrate", path, "--", "python", inputs["script"]],
        ],
        "results": [["report", path, "--no-plots"], ["report", path, "--rebuild", "--no-plots"]],
        "models": [
            ["mutate", "-l", "--models-config", path],
            ["mutate", "-ec", inputs["settings"], "--dry-run", "--models-config", path],
        ],
        "settings": [["mutate", "-ec", path, "--dry-run", *models]],
    }[kind]


@pytest.mark.parametrize("kind", ["dag", "plan", "results", "models", "settings"])
@pytest.mark.parametrize(
    ("content", "problem"),
    [
        (DEEP, "nested deeper than 100 levels"),
        (NOT_UTF8, "is not UTF-8 text (byte 0xff"),
        ("[1, 2, 3]", "expected a JSON object, got"),
        ('{"a": ', "is not JSON: Expecting value at line 1"),
    ],
    ids=["deep", "not-utf8", "list", "truncated"],
)
def test_malformed_files_in_every_command(
    capsys: pytest.CaptureFixture[str],
    inputs: dict[str, Path],
    tmp_path: Path,
    kind: str,
    content: str | bytes,
    problem: str,
) -> None:
    bad = write(tmp_path / f"{kind}.json", content)
    for argv in commands_reading(kind, bad, inputs, tmp_path):
        assert_one_line_error(run_cli(capsys, *argv), str(bad), problem)


def test_gzip_bomb_is_refused_at_the_cap(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    bomb = write(tmp_path / "dag.json.gz", gzip.compress(b" " * (64 * 2**20), compresslevel=9))
    monkeypatch.setenv("CODEDAG_MAX_INPUT_MB", "8")
    result = run_cli(capsys, "optimize", bomb, "--gpus", "0", "--out", tmp_path / "o")
    assert_one_line_error(result, "inflates to more than 8 MiB", "CODEDAG_MAX_INPUT_MB")
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------- DAG contents


def dag_with(inputs: dict[str, Path], tmp_path: Path, **changes: Any) -> Path:
    data = json.loads(inputs["dag"].read_text())
    call = next(n for n in data["nodes"] if n["kind"] == "call")
    for key, value in changes.items():
        if key == "schema_version":
            data[key] = value
        else:
            call[key] = value
    return write(tmp_path / "dag.json", json.dumps(data))


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"schema_version": -1}, "schema_version -1 was never written by codedag"),
        ({"total_ns": -5}, "total_ns -5 is out of range"),
        ({"self_ns": 10**400}, "self_ns 1000"),
        ({"total_ns": 1e400}, "field 'total_ns' is float; expected int"),
    ],
)
def test_bad_dag_values(
    capsys: pytest.CaptureFixture[str],
    inputs: dict[str, Path],
    tmp_path: Path,
    changes: dict[str, Any],
    problem: str,
) -> None:
    dag = dag_with(inputs, tmp_path, **changes)
    result = run_cli(capsys, "optimize", dag, "--gpus", "0", "--out", tmp_path / "o")
    assert_one_line_error(result, problem)


def test_dag_describing_an_absurd_array_is_refused_at_load(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path], tmp_path: Path
) -> None:
    data = json.loads(inputs["dag"].read_text())
    call = next(n for n in data["nodes"] if n["kind"] == "call" and n.get("args"))
    call["args"][0] = {"name": "0", "kind": "array", "shape": [10**6, 10**6, 3], "dtype": "uint8"}
    dag = write(tmp_path / "dag.json", json.dumps(data))
    result = run_cli(capsys, "optimize", dag, "--gpus", "0", "--out", tmp_path / "o")
    assert_one_line_error(result, f"({call['name']}) args[0]", "cannot be rebuilt")


def test_a_plan_given_to_optimize_as_a_dag(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path], tmp_path: Path
) -> None:
    result = run_cli(capsys, "optimize", inputs["plan"], "--gpus", "0", "--out", tmp_path / "o")
    assert_one_line_error(result, "this is a migration plan; give optimize the dag.json")
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------- results versions and raw streams


@pytest.mark.parametrize(
    ("version", "problem"),
    [
        (-1, "schema_version -1 was never written by codedag"),
        ("1", "schema_version must be a whole number, got '1'"),
        (None, "schema_version must be a whole number, got None"),
        (99, "schema_version 99 is newer than this codedag reads"),
    ],
)
def test_results_versions(
    capsys: pytest.CaptureFixture[str],
    inputs: dict[str, Path],
    tmp_path: Path,
    version: Any,
    problem: str,
) -> None:
    data = json.loads(inputs["results"].read_text())
    data["schema_version"] = version
    path = write(tmp_path / "results.json", json.dumps(data))
    assert_one_line_error(run_cli(capsys, "report", path, "--no-plots"), problem)


@pytest.mark.parametrize("name", ["../../../../etc/passwd", "/etc/passwd", "link.csv"])
def test_rebuild_reads_raw_streams_only_inside_the_run_folder(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path], tmp_path: Path, name: str
) -> None:
    run = tmp_path / "run"
    shutil.copytree(inputs["results"].parent, run)
    (run / "link.csv").symlink_to("/etc/passwd")
    data = json.loads((run / "results.json").read_text())
    data["modes"]["baseline"]["files"]["batches"] = name
    write(run / "results.json", json.dumps(data))
    before = (run / "results.json").read_bytes()
    result = run_cli(capsys, "report", run, "--rebuild", "--no-plots")
    assert_one_line_error(result, "modes.baseline.files.batches", "is outside the run folder")
    assert (run / "results.json").read_bytes() == before


# ----------------------------------------------------------------- output paths, checked first


def test_outputs_that_cannot_be_written_are_refused_before_any_work(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path], tmp_path: Path
) -> None:
    file = write(tmp_path / "existing.txt", "keep me")
    folder = tmp_path / "folder"
    folder.mkdir()
    marker = tmp_path / "ran"
    target = write(
        tmp_path / "target.py",
        f"def main():\n    open({str(marker)!r}, 'w').close()\n",
    )
    script = write(tmp_path / "script.py", f"open({str(marker)!r}, 'w').close()\n")
    mutate_ec = ["mutate", "-ec", inputs["settings"], "--models-config", inputs["models"]]
    cases: list[tuple[list[Any], str]] = [
        (["trace", f"{target}:main", "--out", file], "--out " + str(file) + " is a file"),
        (["trace", f"{target}:main", "--out", "/proc/codedag"], "cannot write into"),
        (["optimize", inputs["dag"], "--out", file], "is a file; expected a folder"),
        (["report", inputs["results"], "--out", file], "is a file; expected a folder"),
        (
            ["migrate", inputs["plan"], "--stats-out", folder, "--", "python", script],
            "--stats-out " + str(folder) + " is a folder",
        ),
        (
            ["migrate", inputs["plan"], "--stats-out", "/proc/x.json", "--", "python", script],
            "cannot write into",
        ),
        (
            ["profile", "--device", "cpu", "--output_json", folder, "--trace_dir", tmp_path],
            "--output_json " + str(folder) + " is a folder",
        ),
        (["demo", "--out", file], "is a file; expected a folder"),
        (
            [*mutate_ec, "--results-dir", file],
            "--results-dir",
        ),
        (["results", "--results-dir", tmp_path, "--csv", folder], "is a folder"),
    ]
    for argv, problem in cases:
        assert_one_line_error(run_cli(capsys, *argv), problem)
        assert not marker.exists(), argv  # the work never started
        assert file.read_text() == "keep me"
    assert list(folder.iterdir()) == []


# ----------------------------------------------------------------- numbers


@pytest.mark.parametrize(
    ("argv", "problem"),
    [
        (["optimize", "DAG", "--speedup", "nan"], "--assume-speedup must be a positive number"),
        (["optimize", "DAG", "--assume-speedup", "1e400"], "must be a positive number, got inf"),
        (["optimize", "DAG", "--bandwidth-gbps", "inf"], "--bandwidth-gbps must be a positive"),
        (["optimize", "DAG", "--margin", "nan"], "--margin must be a percentage >= 0"),
        (["optimize", "DAG", "--max-depth", "-1"], "argument --max-depth: must be >= 0"),
        (["optimize", "DAG", "-k", "0"], "-k must be >= 1"),
        (["demo", "--seed", "-1"], "argument --seed: must be >= 0 and <= 4294967295"),
        (["demo", "--seed", str(2**70)], "(seeds are 32-bit)"),
        (["demo", "--seed", "2**70"], "expected a whole number, got '2**70'"),
        (["demo", "--batch-size", "1000000000"], "a batch of 1024 128x128 images is 200 MB"),
        (["demo", "--batches", str(10**12)], "a demo, not a training run"),
        (["demo", "--workers", "-2"], "argument --workers: must be >= 0"),
        (["mutate", "-l", "--timeout", "nan"], "argument --timeout: expected a finite number"),
        (["mutate", "-l", "--cooldown", "-5"], "argument --cooldown: must be >= 0"),
        (["mutate", "-l", "--seed", "-3"], "argument -s/--seed: must be >= 0"),
        (["trace", "x:y", "--out", "o", "--top", "-1"], "argument --top: must be >= 1"),
        (["trace", "x:y", "--out", "o", "--max-nodes", "-5"], "argument --max-nodes: must be"),
        (["profile", "--lr", "nan"], "argument --lr: expected a finite number"),
        (["profile", "--image-size", "100000"], "one float32 RGB image of 8192 px is 800 MB"),
        # once accepted silently: each now names its limit
        (["trace", "x:y", "--out", "o", "--warmup", "1000000000"], "each warm-up runs the whole"),
        (["optimize", "DAG", "--gpus", "1000000"], "<= 256 (the GPUs of one machine)"),
        (["optimize", "DAG", "-k", "1000000"], "-k must be >= 1 and <= 1024"),
        (["optimize", "DAG", "--only", ""], "--only: an empty function name"),
        (["optimize", "DAG", "--exclude", " "], "--exclude: an empty function name"),
        (["migrate", "PLAN", "--guard-calls", str(10**12), "--", "SCRIPT"], "<= 10000"),
        (["tune", "x:y", "--batches", str(10**9)], "--batches must be >= 1 and <= 10000"),
        (["tune", "x:y", "--max-workers", "1000000"], "max_workers=1000000 is more than"),
    ],
)
def test_numeric_flags(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path], argv: list[str], problem: str
) -> None:
    paths = {
        "DAG": str(inputs["dag"]),
        "PLAN": str(inputs["plan"]),
        "SCRIPT": str(inputs["script"]),
    }
    argv = [paths.get(a, a) for a in argv]
    assert_one_line_error(run_cli(capsys, *argv), problem)


@pytest.mark.parametrize(
    "argv",
    [
        ["trace", "x:y", "--out", ""],
        ["optimize", "DAG", "--out", ""],
        ["demo", "--out", ""],
        ["report", "RESULTS", "--out", ""],
        ["results", "--csv", ""],
        ["migrate", "PLAN", "--stats-out", "", "--", "SCRIPT"],
        ["tune", "x:y", "--plan", ""],
        ["experiment", "new", "e", "--root", ""],
    ],
)
def test_an_empty_output_path_is_refused_not_the_current_folder(
    capsys: pytest.CaptureFixture[str],
    inputs: dict[str, Path],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    argv: list[str],
) -> None:
    monkeypatch.chdir(tmp_path)
    paths = {
        "DAG": str(inputs["dag"]),
        "PLAN": str(inputs["plan"]),
        "SCRIPT": str(inputs["script"]),
    }
    paths["RESULTS"] = str(inputs["results"])
    line = assert_one_line_error(run_cli(capsys, *[paths.get(a, a) for a in argv]))
    assert "empty" in line, line
    assert list(tmp_path.iterdir()) == []  # nothing written into the current folder


def test_demo_sample_count_is_bounded_with_the_reason(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    result = run_cli(
        capsys, "demo", "--batches", "1000", "--batch-size", "1000", "--out", tmp_path / "o"
    )
    # the data set holds one epoch: 1000 batches over the default 2 epochs, 500 each
    assert_one_line_error(result, "500000 samples", "holds every sample in memory")
    assert not (tmp_path / "o").exists()


# ----------------------------------------------------------------- devices, modules, datasets


@pytest.mark.parametrize(
    ("device", "problem"),
    [
        ("bogus", "--device 'bogus' is not a device"),
        ("cuda:-1", "--device 'cuda:-1' is not a device"),
        ("cuda:5", "--device cuda:5"),
    ],
)
def test_migrate_device_is_checked(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path], device: str, problem: str
) -> None:
    result = run_cli(
        capsys, "migrate", inputs["plan"], "--device", device, "--", "python", inputs["script"]
    )
    line = assert_one_line_error(result, problem)
    if device == "cuda:5":
        assert "CUDA is not available" in line or "no such GPU here" in line


def test_migrate_missing_module_is_one_line(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path]
) -> None:
    result = run_cli(capsys, "migrate", inputs["plan"], "--", "python", "-m", "no_such_module")
    assert_one_line_error(result, "-m no_such_module: no module named 'no_such_module'")
    result = run_cli(capsys, "migrate", inputs["plan"], "--", "python", "-m", "no_such_pkg.mod")
    assert_one_line_error(result, "no module named 'no_such_pkg'")


def test_trace_dataloader_whose_dataset_raises(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(
        tmp_path / "broken_loader.py",
        "import torch\n"
        "from torch.utils.data import DataLoader, Dataset\n"
        "class Broken(Dataset):\n"
        "    def __len__(self):\n        return 4\n"
        "    def __getitem__(self, i):\n        raise ValueError('corrupt sample ' + str(i))\n"
        "def factory():\n    return DataLoader(Broken(), batch_size=2)\n",
    )
    monkeypatch.syspath_prepend(str(tmp_path))
    result = run_cli(capsys, "trace", "--dataloader", "broken_loader:factory", "--out", tmp_path)
    # the untraced warm-up run fetches the samples after the first batch's
    assert_one_line_error(result, "raised ValueError: corrupt sample 2")


def test_results_database_that_is_not_sqlite(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    write(tmp_path / "codedag_energy.sqlite", b"this is not a database" * 100)
    result = run_cli(capsys, "results", "--results-dir", tmp_path)
    assert_one_line_error(result, "is not a codedag results database")


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_damaged_results_database_in_every_command(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path], tmp_path: Path, damage: str
) -> None:
    folder = tmp_path / "results"
    path = damaged_results_db(folder, damage)
    mutate = ["mutate", "-r", "toy", "-m", "m", "--models-config", inputs["models"]]
    commands = [
        ["results", "--results-dir", folder, "--experiments"],
        [*mutate, "--avoid-previous", "--dry-run", "--results-dir", folder],
    ]
    if damage in DAMAGES[:3]:  # found on opening: before listing sessions or running anything
        commands += [["results", "--results-dir", folder], [*mutate, "--results-dir", folder]]
    for argv in commands:
        assert_one_line_error(run_cli(capsys, *argv), str(path), "not a codedag results database")
    assert [p.name for p in folder.iterdir()] == [path.name]  # no session was started


def test_a_sink_uri_is_shown_without_its_credentials(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    sink = "mlfow:http://me:hunter2@tracking:5000"  # a misspelt sink name
    result = run_cli(capsys, "demo", "--sink", sink, "--out", tmp_path / "o")
    line = assert_one_line_error(result, "unknown sink", "http://me:***@tracking:5000")
    assert "hunter2" not in line


@pytest.mark.parametrize("content", ["[1, 2]", NOT_UTF8, None], ids=["list", "not-utf8", "folder"])
def test_env_setup_with_a_bad_experiment_config(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, content: str | bytes | None
) -> None:
    folder = tmp_path / "kaggle_demo"
    folder.mkdir()
    for name in ("baseline.py", "optimization.py", "requirements.txt"):
        write(folder / name, "")
    config = folder / "experiment_config.json"
    if content is None:
        config.mkdir()
    else:
        write(config, content)
    result = run_cli(capsys, "env", "--root", tmp_path, "setup", "demo", "--local")
    assert_one_line_error(result, "experiment config", str(config))


# ----------------------------------------------------------------- the real process boundary


def test_subprocess_boundary_has_no_traceback(inputs: dict[str, Path], tmp_path: Path) -> None:
    deep = write(tmp_path / "deep.json", DEEP)
    for argv in (
        ["optimize", str(deep), "--out", str(tmp_path / "o")],
        ["migrate", str(inputs["plan"]), "--", "python", "-m", "no_such_module"],
        ["demo", "--seed", str(2**70)],
    ):
        out = subprocess.run(
            [sys.executable, "-m", "codedag", *argv],
            capture_output=True,
            text=True,
            timeout=120,
            env={**os.environ, "COLUMNS": "80"},
        )
        assert out.returncode == 2, out.stderr
        assert len(out.stderr.strip().splitlines()) == 1, out.stderr
        assert "Traceback" not in out.stderr


@pytest.mark.parametrize("name", ["../../outside", "a/b", ".hidden", ""])
def test_repository_names_cannot_leave_the_results_folder(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path], tmp_path: Path, name: str
) -> None:
    config = json.loads(inputs["models"].read_text())
    config["repositories"] = {name: config["repositories"]["toy"]}
    models = write(tmp_path / "models.json", json.dumps(config))
    result = run_cli(capsys, "mutate", "-l", "--models-config", models)
    assert_one_line_error(result, "repository name", "it names result folders")


def test_results_summary_of_the_wrong_type(
    capsys: pytest.CaptureFixture[str], inputs: dict[str, Path], tmp_path: Path
) -> None:
    data = json.loads(inputs["results"].read_text())
    data["modes"]["baseline"]["summary"]["step_time"] = "fast"
    data["modes"]["optimization"]["batch_times"].append([3, "slow"])
    path = write(tmp_path / "results.json", json.dumps(data))
    line = assert_one_line_error(run_cli(capsys, "report", path, "--no-plots"))
    assert "modes.baseline.summary.step_time: expected an object or null" in line
    assert "modes.optimization.batch_times[2]: expected a list of 2 numbers" in line

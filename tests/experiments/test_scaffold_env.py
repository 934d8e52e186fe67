"""Experiment scaffolding and the environment verbs (Docker paths with fake statuses)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from codedag.errors import ConfigError, ExperimentError
from codedag.experiments.docker import DockerStatus
from codedag.experiments.environment import load_experiment, run_command
from codedag.experiments.scaffold import class_prefix, new_experiment

NO_ENGINE = DockerStatus("Docker version 28", None, False, "no Docker engine reachable: refused")
GPU_ENGINE = DockerStatus("Docker version 28", "28.2.2", True, "engine reachable")


@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_new_experiment_writes_valid_files(tmp_path: Path, framework: str) -> None:
    scaffold = new_experiment("birdclef_2023", framework, tmp_path)
    folder = tmp_path / "kaggle_birdclef_2023"
    assert scaffold.folder == folder
    names = sorted(p.name for p in folder.iterdir())
    assert names == ["baseline.py", "experiment_config.json", "optimization.py", "requirements.txt"]
    assert (tmp_path / "docker" / "Dockerfile.pytorch").is_file()
    assert (tmp_path / "docker" / "Dockerfile.tensorflow").is_file()
    config = json.loads((folder / "experiment_config.json").read_text())
    assert config["experiment_name"] == "birdclef_2023" and config["framework"] == framework
    assert config["sinks"] == []  # "tensorboard", "mlflow", "mlflow:URI"
    for script in ("baseline.py", "optimization.py"):
        ast.parse((folder / script).read_text())  # valid Python after substitution
    baseline = (folder / "baseline.py").read_text()
    assert "codedag" not in baseline.split('"""', 2)[2]  # the original code does not import it
    optimization = (folder / "optimization.py").read_text()
    assert "from baseline import" in optimization and "PipelineMigrator" in optimization


@pytest.mark.slow
def test_pytorch_baseline_trains(tmp_path: Path) -> None:
    folder = new_experiment("toy", "pytorch", tmp_path).folder
    baseline_py = folder / "baseline.py"  # the same code on fewer samples: 2 batches, not 8
    baseline_py.write_text(
        baseline_py.read_text().replace('"num_samples": 128', '"num_samples": 32')
    )
    out = subprocess.run(
        [sys.executable, "baseline.py"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith("epoch 1: loss")


def test_existing_folder_needs_force(tmp_path: Path) -> None:
    new_experiment("x1", "pytorch", tmp_path)
    with pytest.raises(ConfigError, match="--force"):
        new_experiment("x1", "pytorch", tmp_path)
    new_experiment("x1", "pytorch", tmp_path, force=True)


@pytest.mark.parametrize(
    ("name", "framework", "match"),
    [("bad name", "pytorch", "letters"), ("ok", "jax", "framework"), ("", "pytorch", "letters")],
)
def test_bad_input(tmp_path: Path, name: str, framework: str, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        new_experiment(name, framework, tmp_path)


@pytest.mark.parametrize(
    ("name", "prefix"), [("birdclef_2023", "Birdclef2023"), ("2024-rsna", "Kaggle2024Rsna")]
)
def test_class_prefix(name: str, prefix: str) -> None:
    assert class_prefix(name) == prefix and prefix.isidentifier()


def test_missing_experiment_is_one_clear_error(tmp_path: Path) -> None:
    new_experiment("present", "pytorch", tmp_path)
    with pytest.raises(ConfigError, match=r"no experiment 'absent'.*known: present"):
        load_experiment(tmp_path, "absent")


def test_run_without_engine_suggests_local(tmp_path: Path) -> None:
    new_experiment("e1", "pytorch", tmp_path)
    experiment = load_experiment(tmp_path, "e1")
    with pytest.raises(ExperimentError, match="--local"):
        run_command(experiment, "baseline", local=False, status=NO_ENGINE)
    local = run_command(experiment, "optimization", local=True, status=None)
    assert local == [sys.executable, "optimization.py", "--modes", "optimization"]


def test_docker_run_uses_gpus_when_nvidia_runtime_exists(tmp_path: Path) -> None:
    new_experiment("e2", "pytorch", tmp_path)
    command = run_command(load_experiment(tmp_path, "e2"), "baseline", False, GPU_ENGINE)
    assert command[:3] == ["docker", "run", "--rm"] and "--gpus" in command
    assert command[-4:] == ["python", "optimization.py", "--modes", "baseline"]
    with pytest.raises(ConfigError, match="mode must be"):
        run_command(load_experiment(tmp_path, "e2"), "train", True, None)


def test_cli_errors_exit_2(tmp_path: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "codedag", *args],
            capture_output=True,
            text=True,
            cwd=tmp_path,
            timeout=120,
        )

    missing = cli("env", "run", "ghost", "baseline", "--local")
    assert missing.returncode == 2 and "no experiment 'ghost'" in missing.stderr
    assert len(missing.stderr.strip().splitlines()) == 1
    created = cli("experiment", "new", "demo1")
    assert created.returncode == 0 and "kaggle_demo1" in created.stdout

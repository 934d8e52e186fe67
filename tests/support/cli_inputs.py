"""Valid inputs of every kind the CLI reads, and the checks of a bad-input outcome.

Used by the bad-input tests and the fuzz test: a traced DAG, the plan ``optimize`` writes for it,
a monitored run's results with its CSV streams, a models config with a settings file, and a
script for ``migrate`` to run.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest

from codedag.cli.main import main

SCRIPT = """
import numpy as np
print("ran", float(np.clip(np.arange(4.0), 1, 2).sum()))
"""


def preprocess() -> np.ndarray:
    """A small pipeline for the tracer: per-sample cv2 and NumPy, as a Dataset would."""
    out = []
    for i in range(4):
        image = np.full((32, 32, 3), i * 40, dtype=np.uint8)
        image = cv2.resize(image, (16, 16))
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        out.append(np.clip(image.astype(np.float32) / 255.0, 0.0, 1.0))
    return np.stack(out)


def make_dag(folder: Path) -> Path:
    """dag.json of :func:`preprocess`, traced."""
    from codedag.trace.tracer import EnhancedTracer

    tracer = EnhancedTracer(max_depth=6, track_memory=False)
    tracer.trace(preprocess)
    return tracer.dag.save(folder / "dag.json")


def make_plan(folder: Path, dag: Path) -> Path:
    """migration_plan.json as ``codedag optimize --target-device cpu`` writes it; the what-if
    speedup places calls (measured on a CPU, torch would keep them all on their library)."""
    out = folder / "optimized"
    argv = ["-q", "optimize", str(dag), "--gpus", "0", "--target-device", "cpu"]
    code = main([*argv, "--assume-speedup", "8", "--out", str(out)])
    assert code == 0
    return out / "migration_plan.json"


def make_results(folder: Path) -> Path:
    """A run folder: results.json with two modes and their CSV streams."""
    from codedag.monitor.experiment import ExperimentMonitor

    monitor = ExperimentMonitor("inputs", run_dir=folder / "run", flush_interval_s=0)
    for mode, batches in (("baseline", 3), ("optimization", 2)):
        monitor.start_mode(mode, config={"lr": 0.1}, resource_interval=None)
        for index in range(batches):
            monitor.start_batch()
            monitor.end_batch(4)
            monitor.log_loss(0, index, 1.0 / (index + 1))
            monitor.log_accuracy(0, index, 0.5)
        monitor.stop_mode()
    return monitor.save_json()


def make_models_config(folder: Path) -> tuple[Path, Path]:
    """A models config (one repository, one model) and a settings file naming it."""
    repo = folder / "repo"
    repo.mkdir(parents=True, exist_ok=True)
    (repo / "train.py").write_text("print('Training complete')\n")
    config = {
        "repositories": {
            "toy": {
                "path": str(repo),
                "train_script": "train.py",
                "models": {"m": {}},
                "supported_hyperparams": {
                    "epochs": {"flag": "--epochs", "type": "int", "default": 2, "range": [1, 4]},
                    "learning_rate": {"flag": "--lr", "type": "float", "default": 0.1},
                },
                "success_patterns": ["Training complete"],
            }
        }
    }
    models = folder / "models.json"
    models.write_text(json.dumps(config))
    settings = folder / "settings.json"
    settings.write_text(
        json.dumps({"experiment_name": "inputs", "experiments": [{"repo": "toy", "model": "m"}]})
    )
    return models, settings


def run_cli(capsys: pytest.CaptureFixture[str], *argv: Any) -> tuple[int, str, str]:
    """``codedag ARGV`` in this process: (exit code, stdout, stderr)."""
    try:
        code = main([str(a) for a in argv])
    except SystemExit as done:  # argument errors
        code = done.code if isinstance(done.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def assert_one_line_error(result: tuple[int, str, str], *fragments: str) -> str:
    """Exit code 2 and exactly one line on stderr, naming the problem; returns that line."""
    code, _out, err = result
    assert code == 2, err
    assert "Traceback" not in err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]
    return lines[0]


def assert_files_unchanged(before: dict[Path, bytes], paths: Sequence[Path]) -> None:
    for path in paths:
        assert path.read_bytes() == before[path], f"{path} changed"

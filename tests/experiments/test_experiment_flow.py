"""A scaffolded experiment runs both modes with ``env run --local`` and compares as one."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from codedag.experiments.scaffold import new_experiment
from codedag.monitor.results import load_results, merge_results


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codedag", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        timeout=600,
    )


@pytest.mark.slow
@pytest.mark.parametrize("framework", ["pytorch", "tensorflow"])
def test_env_run_local_both_modes_then_compare(tmp_path: Path, framework: str) -> None:
    if framework == "tensorflow":
        pytest.importorskip("tensorflow", reason="the tensorflow extra is not installed")
    folder = new_experiment("toy", framework, tmp_path / "experiments").folder
    config = json.loads((folder / "experiment_config.json").read_text())
    config["max_batches_per_epoch"] = 2
    (folder / "experiment_config.json").write_text(json.dumps(config))
    baseline_py = folder / "baseline.py"
    baseline_py.write_text(
        baseline_py.read_text()
        .replace('"num_samples": 128', '"num_samples": 32')
        .replace('"train_batch_size": 16', '"train_batch_size": 8')
    )

    for mode in ("baseline", "optimization"):
        out = cli("env", "run", "toy", mode, "--local", cwd=tmp_path)
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]

    files = sorted((folder / "results").glob("toy_*/results.json"))
    assert [f.parent.name.split("_")[1] for f in files] == ["baseline", "optimization"]
    runs = [load_results(f) for f in files]
    assert list(runs[0]["modes"]) == ["baseline"] and list(runs[1]["modes"]) == ["optimization"]
    for run, mode in zip(runs, ("baseline", "optimization")):
        summary = run["modes"][mode]["summary"]
        assert summary["batch_time"]["mean"] > 0 and summary["loss"]["final"] is not None
    plan = json.loads((folder / "results" / "migration_plan.json").read_text())
    assert plan["schema_version"] == 2 and "context_device_map" in plan
    assert set(merge_results(runs)["modes"]) == {"baseline", "optimization"}

    compared = cli("compare", *map(str, files), "--no-plots", "--json", cwd=tmp_path)
    assert compared.returncode == 0, compared.stderr
    rows = json.loads(compared.stdout)["modes"]
    assert [r["mode"] for r in rows] == ["baseline", "optimization"]
    assert rows[1]["speedup"] is not None

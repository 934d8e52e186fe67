"""A scaffolded experiment runs both modes with ``env run --local`` and compares as one."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from codedag.cli.main import main
from codedag.experiments.scaffold import new_experiment
from codedag.monitor.results import load_results, merge_results

MODES = ("baseline", "optimization")


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

    # the two modes write apart (their own results folders): they run side by side
    with ThreadPoolExecutor(2) as pool:
        done = list(pool.map(lambda m: cli("env", "run", "toy", m, "--local", cwd=tmp_path), MODES))
    for out in done:
        assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-3000:]

    files = sorted((folder / "results").glob("toy_*/results.json"))
    assert [f.parent.name.split("_")[1] for f in files] == ["baseline", "optimization"]
    runs = [load_results(f) for f in files]
    assert list(runs[0]["modes"]) == ["baseline"] and list(runs[1]["modes"]) == ["optimization"]
    for run, mode in zip(runs, MODES):
        summary = run["modes"][mode]["summary"]
        assert summary["batch_time"]["mean"] > 0 and summary["loss"]["final"] is not None
    plan = json.loads((folder / "results" / "migration_plan.json").read_text())
    assert plan["schema_version"] == 2 and "context_device_map" in plan
    assert set(merge_results(runs)["modes"]) == {"baseline", "optimization"}

    compared = io.StringIO()
    with contextlib.redirect_stdout(compared):  # in-process: one interpreter start less
        assert main(["compare", *map(str, files), "--no-plots", "--json"]) == 0
    rows = json.loads(compared.getvalue())["modes"]
    assert [r["mode"] for r in rows] == ["baseline", "optimization"]
    assert rows[1]["speedup"] is not None

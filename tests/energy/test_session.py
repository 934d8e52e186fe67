"""Sessions end to end: a real bundled example, retries, timeouts, executors, parallel mode."""

from __future__ import annotations

import csv
import itertools
import json
import time
from pathlib import Path

import psutil
import pytest

from codedag.cli.main import main
from codedag.devices.fake_nvml import FakeGPU, FakeNVML
from codedag.devices.gpus import NvmlGPUs
from codedag.energy.config import bundled_path, load_models_config
from codedag.energy.executors import LocalExecutor
from codedag.energy.jobs import plan_jobs
from codedag.energy.session import EnergySession, SessionOptions
from codedag.energy.settings import BatchSettings
from codedag.energy.store import BASE_COLUMNS, ENERGY_COLUMNS, ResultsDB


def dead(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def child_pids(log: Path) -> list[int]:
    return [int(x.split()[1]) for x in log.read_text().splitlines() if x.startswith("child ")]


def session(tmp_path: Path, config: Path, experiments: list[dict], **kw) -> tuple:
    models = load_models_config(config)
    settings = BatchSettings.model_validate(
        {
            "experiment_name": "t",
            "mode": kw.pop("mode", "default"),
            "max_retries": kw.pop("max_retries", 0),
            "experiments": experiments,
        }
    )
    options = SessionOptions(
        results_dir=tmp_path / "results",
        cooldown_s=kw.pop("cooldown_s", 0.0),
        retry_pause_s=0.0,
        echo=None,
        kill_grace_s=1.0,
        timeout_s=kw.pop("timeout_s", None),
    )
    runner = EnergySession(models, settings, options, **kw)
    return runner.run(plan_jobs(models, settings, seed=5)), runner


def bundled_config_one_thread(tmp_path: Path) -> Path:
    """The bundled models config, with one torch thread (this test machine is shared)."""
    data = json.loads(bundled_path("models_config.json").read_text())
    repo = data["repositories"]["examples"]
    repo["path"] = str(bundled_path("examples"))
    repo["required_args"] = ["--threads", "1"]
    path = tmp_path / "models.json"
    path.write_text(json.dumps(data))
    return path


@pytest.mark.slow
def test_real_bundled_example_with_two_mutated_configs(tmp_path: Path, capsys) -> None:
    results = tmp_path / "results"
    argv = ["mutate", "-r", "examples", "-m", "mnist_rnn", "-mt", "epochs,learning_rate"]
    argv += ["--models-config", str(bundled_config_one_thread(tmp_path))]
    argv += ["-n", "2", "-s", "7", "--cooldown", "0", "--results-dir", str(results), "--no-echo"]
    assert main(argv) == 0
    (run_dir,) = results.glob("run_*")
    with open(run_dir / "summary.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2
    columns = list(rows[0])
    assert columns[: len(BASE_COLUMNS)] == BASE_COLUMNS
    assert {"hyperparam_epochs", "hyperparam_learning_rate", "perf_test_accuracy"} <= set(columns)
    assert columns[-len(ENERGY_COLUMNS) :] == list(ENERGY_COLUMNS)
    defaults = load_models_config().defaults("examples", "mnist_rnn")
    configs = set()
    for row in rows:
        folder = run_dir / row["experiment_id"]
        record = json.loads((folder / "experiment.json").read_text())
        assert record["training_success"] is True and row["training_success"] == "True"
        hp = record["hyperparameters"]
        configs.add((hp["epochs"], hp["learning_rate"]))
        assert (hp["epochs"], hp["learning_rate"]) != (
            defaults["epochs"],
            defaults["learning_rate"],
        )
        assert f"Epoch {hp['epochs']}/{hp['epochs']}" in (folder / "training.log").read_text()
        assert 0.0 <= record["performance_metrics"]["test_accuracy"] <= 100.0
        energy = record["energy_metrics"]
        assert (folder / "energy" / "cpu_energy.txt").exists()
        if energy["cpu_energy_total_joules"] is None:  # this machine: no RAPL, perf reads 0 J
            assert energy["cpu_energy_source"] == "unavailable"
            assert energy["cpu_energy_unavailable_reason"]
            assert row["energy_cpu_total_joules"] == ""
        else:
            assert energy["cpu_energy_source"] in ("rapl", "perf")
        assert record["governor"]
    assert len(configs) == 2
    capsys.readouterr()
    assert main(["results", "--results-dir", str(results), "--csv", "-"]) == 0
    exported = list(csv.DictReader(capsys.readouterr().out.splitlines()))
    assert [r["experiment_id"] for r in exported] == [r["experiment_id"] for r in rows]
    assert exported[0]["session"] == run_dir.name
    assert main(["results", "--results-dir", str(results), "--json"]) == 0
    (listed,) = json.loads(capsys.readouterr().out)
    assert (listed["session"], listed["experiments"], listed["succeeded"]) == (run_dir.name, 2, 2)
    assert listed["status"] == "completed"


def test_retry_error_patterns_and_cooldown(tmp_path: Path, toy: Path) -> None:
    result, _ = session(
        tmp_path,
        toy,
        [{"repo": "toy", "model": "flaky"}, {"repo": "toy", "model": "liar"}],
        max_retries=2,
        cooldown_s=0.2,
    )
    flaky, liar = result.records
    assert flaky["training_success"] and flaky["retries"] == 1
    assert flaky["attempts"][0]["error"] == "exit code 3"
    assert flaky["performance_metrics"] == {"accuracy": 90.0}
    assert not liar["training_success"] and liar["retries"] == 2
    assert "error pattern" in liar["error_message"]
    gap = (
        liar["energy_metrics"]["window_start_unix_s"] - flaky["energy_metrics"]["window_end_unix_s"]
    )
    assert gap >= 0.2
    with open(result.path / "summary.csv") as handle:
        assert [r["training_success"] for r in csv.DictReader(handle)] == ["True", "False"]
    db = ResultsDB(tmp_path / "results")
    assert [r["experiment_id"] for r in db.experiments(success=False)] == ["toy_liar_001"]


def test_timeout_ends_the_run_and_leaves_no_process(tmp_path: Path, toy: Path) -> None:
    result, _ = session(
        tmp_path,
        toy,
        [{"repo": "toy", "model": "sleepy", "hyperparameters": {"epochs": 3}}],
        timeout_s=1.0,
    )
    (record,) = result.records
    assert record["timed_out"] and not record["training_success"]
    assert record["error_message"].startswith("timed out")
    (child,) = child_pids(result.path / record["experiment_id"] / "training.log")
    assert dead(child)


class RealtimeNVML(FakeNVML):
    """A fake whose energy counters follow the wall clock (power x elapsed time)."""

    def nvmlDeviceGetTotalEnergyConsumption(self, handle: FakeGPU) -> int:
        return int(handle.power_w * time.monotonic() * 1000)


def test_executor_pins_one_experiment_per_gpu(tmp_path: Path, toy: Path) -> None:
    nvml = RealtimeNVML([FakeGPU(power_w=200.0), FakeGPU(power_w=100.0)])
    gpus = NvmlGPUs(nvml, environ={})
    result, _runner = session(
        tmp_path,
        toy,
        [{"repo": "toy", "model": "pinned", "runs": 4}],
        gpus=gpus,
        executor=LocalExecutor(gpus),
    )
    gpus.close()
    assert len(result.records) == 4
    by_gpu: dict[str, list[tuple[float, float]]] = {}
    for record in result.records:
        visible = record["cuda_visible_devices"]
        assert visible in ("GPU-fake-0000", "GPU-fake-0001")
        log = (result.path / record["experiment_id"] / "training.log").read_text()
        assert f"visible {visible}" in log
        energy = record["energy_metrics"]
        power = 200.0 if visible.endswith("0") else 100.0
        assert energy["gpu_energy_total_joules"] > 0 and energy["gpu_energy_source"] == (
            "nvml_energy_counter"
        )
        assert energy["gpu_power_avg_watts"] == power
        assert "concurrently" in energy["cpu_energy_unavailable_reason"]
        by_gpu.setdefault(visible, []).append(
            (energy["window_start_unix_s"], energy["window_end_unix_s"])
        )
    for windows in by_gpu.values():
        windows.sort()
        assert all(a[1] <= b[0] for a, b in itertools.pairwise(windows))


def test_parallel_mode_always_stops_the_background_load(tmp_path: Path, toy: Path) -> None:
    experiment = {
        "repo": "toy",
        "model": "waiter",
        "mutate": ["learning_rate"],
        "background": {"repo": "toy", "model": "sleepy", "hyperparameters": {"epochs": 60}},
    }
    result, _ = session(tmp_path, toy, [experiment], mode="parallel")
    (record,) = result.records
    assert record["training_success"] and record["mode"] == "parallel"
    assert record["performance_metrics"] == {"accuracy": 70.0}  # it saw the background start
    assert record["background"]["runs"] == 1
    (pid,) = child_pids(result.path / record["experiment_id"] / "background.log")
    assert dead(pid)


def test_invalid_inputs_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    bad_settings = tmp_path / "s.json"
    bad_settings.write_text(json.dumps({"experiment_name": "x", "experimnts": []}))
    bad_models = tmp_path / "m.json"
    bad_models.write_text(json.dumps({"repositories": {"r": {"pth": "."}}}))
    cases = [
        (["-ec", str(bad_settings)], "experimnts: unknown key"),
        (["-l", "--models-config", str(bad_models)], "repositories.r.pth: unknown key"),
        (["-r", "examples"], "-r/--repo and -m/--model go together"),
        (["-r", "examples", "-m", "mnist_cnn", "-mt", "epochz"], "mutate: expected"),
        (["-ec", "nonexistent"], "does not exist"),
    ]
    for args, expected in cases:
        capsys.readouterr()
        assert main(["mutate", *args, "--results-dir", str(tmp_path / "r")]) == 2
        err = capsys.readouterr().err.strip()
        assert err.startswith("codedag mutate: error:") and expected in err, err
        assert "\n" not in err
    assert not (tmp_path / "r").exists()


def test_a_program_that_cannot_start_is_a_failed_experiment(tmp_path: Path, toy: Path) -> None:
    data = json.loads(toy.read_text())
    data["repositories"]["toy"]["interpreter"] = [str(tmp_path / "no-such-python")]
    toy.write_text(json.dumps(data))
    result, _ = session(tmp_path, toy, [{"repo": "toy", "model": "ok"}], max_retries=1)
    (record,) = result.records
    assert not record["training_success"] and record["retries"] == 1
    assert record["error_message"].startswith("cannot start")
    assert result.status == "completed"


def test_local_executor_slots() -> None:
    from codedag.devices.gpus import EmptyGPUs
    from codedag.energy.executors import Slot

    assert LocalExecutor(EmptyGPUs()).slots() == [Slot()]  # CPU only: one at a time
    nvml = FakeNVML([FakeGPU(memory_used_mb=500.0), FakeGPU(memory_used_mb=30_000.0)])
    with NvmlGPUs(nvml, environ={}) as gpus:
        (slot,) = LocalExecutor(gpus).slots()  # the busy GPU is left alone
    assert slot.gpu_index == 0 and slot.env() == {"CUDA_VISIBLE_DEVICES": "GPU-fake-0000"}

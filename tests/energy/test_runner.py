"""One experiment where it runs: judging an attempt, reading metrics off the log, cooldowns,
retries, and the record and raw energy files it leaves."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from codedag.devices.gpus import GPUInfo, GPUs
from codedag.energy.config import load_models_config
from codedag.energy.executors import Slot
from codedag.energy.jobs import Job, RunSpec
from codedag.energy.meters import CpuEnergyMeter
from codedag.energy.process import CommandResult
from codedag.energy.runner import (
    MemoryCooldown,
    Place,
    extract_metrics,
    failed_result,
    gpu_record,
    judge,
    run_experiment,
)


def _result(exit_code: int | None = 0, timed_out: bool = False) -> CommandResult:
    return CommandResult(["train"], exit_code, 1.25, timed_out, 0.0, 1.25)


def test_an_attempt_succeeds_on_exit_zero_with_a_success_pattern_and_no_error_pattern() -> None:
    ok = ["Training complete"]
    errors = [r"Traceback \(most recent"]
    assert judge(_result(), "Training complete\n", ok, errors) is None
    assert judge(_result(timed_out=True), "", ok, errors) == "timed out after 1.2 s"
    assert judge(_result(None), "", ok, errors) == "interrupted"
    assert judge(_result(3), "", ok, errors) == "exit code 3"
    failed = judge(_result(), "Traceback (most recent call last):\nTraining complete", ok, errors)
    assert failed is not None and failed.startswith("log matches error pattern")
    assert (
        judge(_result(), "done\n", ok, errors)
        == "no success pattern matched (['Training complete'])"
    )
    assert judge(_result(), "anything", [], []) is None


def test_metrics_are_the_last_number_each_pattern_captures() -> None:
    log = "Test Accuracy: 50.00%\nloss 0.3 0.2\nTest Accuracy: 91.50%\nTest Accuracy: n/a%\n"
    patterns = {
        "accuracy": r"Test Accuracy: ([0-9.]+)%",
        "loss": r"loss ([0-9.]+) ([0-9.]+)",
        "absent": r"f1 ([0-9.]+)",
    }
    assert extract_metrics(log, patterns) == {"accuracy": 91.5, "loss": 0.3}


def test_a_cooldown_waits_out_what_is_left_and_a_stop_ends_it() -> None:
    cooldown, stop = MemoryCooldown(), threading.Event()
    assert cooldown.wait("gpu0", 10.0, stop)  # nothing ended there yet
    cooldown.mark("gpu0")
    start = time.monotonic()
    assert cooldown.wait("gpu0", 0.05, stop)
    assert time.monotonic() - start >= 0.04
    assert cooldown.wait("gpu1", 10.0, stop)  # another slot's clock
    stop.set()
    assert not cooldown.wait("gpu0", 10.0, stop)


class OneGPU(GPUs):
    def info(self) -> list[GPUInfo]:
        return [GPUInfo(0, "Test GPU", 1000.0, "1.0", "GPU-abc", False)]


def test_the_gpu_record_names_the_slots_gpu() -> None:
    assert gpu_record(OneGPU(), Slot()) is None
    assert gpu_record(OneGPU(), Slot(0)) == {"index": 0, "name": "Test GPU", "uuid": "GPU-abc"}
    assert gpu_record(OneGPU(), Slot(3, "GPU-x")) == {"index": 3, "name": None, "uuid": "GPU-x"}


def _spec(toy: Path, model: str) -> RunSpec:
    job = Job("toy", model, "default", {"epochs": 0, "learning_rate": 0.1})
    return RunSpec(job, load_models_config(toy), max_retries=2, retry_pause_s=0.0, cooldown_s=0.0)


def _place() -> Place:
    return Place(Slot(), GPUs(), lambda: CpuEnergyMeter("test"), MemoryCooldown(), "unchanged")


def test_a_failed_attempt_is_retried_and_the_record_keeps_every_attempt(
    toy: Path, tmp_path: Path
) -> None:
    folder = tmp_path / "exp1"
    record = run_experiment(_spec(toy, "flaky"), folder, _place(), threading.Event())
    assert record is not None and record["training_success"] is True
    assert record["retries"] == 1
    assert [a["error"] for a in record["attempts"]] == ["exit code 3", None]
    assert record["performance_metrics"] == {"accuracy": 90.0}
    assert record["slot"] == "cpu" and record["executor"] == "local"
    cpu = json.loads((folder / "energy" / "cpu_energy.json").read_text())
    assert cpu["source"] == "unavailable" and cpu["unavailable_reason"] == "test"
    log = (folder / "training.log").read_text()
    assert log.count("# codedag: ") == 2  # both attempts in one log
    never = failed_result(_spec(toy, "flaky"), "could not start", "local")
    assert set(never) == set(record)  # an experiment that never ran has the same keys
    assert never["energy_metrics"]["window_start_unix_s"] is None


def test_a_stopped_session_runs_nothing(toy: Path, tmp_path: Path) -> None:
    stop = threading.Event()
    stop.set()
    assert run_experiment(_spec(toy, "ok"), tmp_path / "exp", _place(), stop) is None
    assert not (tmp_path / "exp" / "training.log").exists()

"""Ctrl-C (SIGINT to the session process) mid-session: no process left, finished results kept."""

from __future__ import annotations

import csv
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil

from codedag.energy.process import group_members


def wait_for(predicate, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_ctrl_c_leaves_no_process_and_keeps_finished_experiments(tmp_path: Path, toy: Path) -> None:
    settings = tmp_path / "settings.json"
    settings.write_text(
        json.dumps(
            {
                "experiment_name": "interrupt",
                "mode": "default",
                "max_retries": 0,
                "experiments": [
                    {"repo": "toy", "model": "ok"},
                    {"repo": "toy", "model": "sleepy", "hyperparameters": {"epochs": 120}},
                    {"repo": "toy", "model": "ok", "hyperparameters": {"epochs": 2}},
                ],
            }
        )
    )
    results = tmp_path / "results"
    command = [sys.executable, "-m", "codedag", "mutate", "-ec", str(settings)]
    command += ["--models-config", str(toy), "--results-dir", str(results), "--cooldown", "0"]
    session = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        log = []

        def sleepy_started() -> bool:
            log[:] = list(results.glob("run_*/toy_sleepy_001/training.log"))
            return bool(log) and "child " in log[0].read_text()

        wait_for(sleepy_started)
        grandchild = int(log[0].read_text().split("child ")[1].split()[0])
        leader = psutil.Process(grandchild).ppid()
        assert leader != session.pid and os.getpgid(leader) == leader  # its own group
        session.send_signal(signal.SIGINT)
        out, err = session.communicate(timeout=30)
    finally:
        if session.poll() is None:
            session.kill()
    assert session.returncode == 130, err
    assert "interrupted" in err
    assert gone(leader) and gone(grandchild)
    assert group_members(leader) == []
    (run_dir,) = results.glob("run_*")
    with open(run_dir / "summary.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert [r["experiment_id"] for r in rows] == ["toy_ok_001"]
    assert "toy_ok_001" in out  # the summary table of the finished experiments
    info = json.loads((run_dir / "session.json").read_text())
    assert info["status"] == "interrupted" and info["finished_experiments"] == 1
    assert not (run_dir / "toy_sleepy_001" / "experiment.json").exists()

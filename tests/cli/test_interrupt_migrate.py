"""SIGTERM during ``codedag migrate``: the script's cleanup runs, the counters are written."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from cli_inputs import make_dag, make_plan

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SCRIPT = """
import time
import numpy as np
try:
    for i in range(3):
        np.stack([np.zeros(3), np.ones(3)])
    print("ready", flush=True)
    time.sleep(60)
finally:
    print("cleanup ran", flush=True)
"""


@pytest.mark.slow
def test_sigterm_runs_the_scripts_finally_and_writes_the_counters(tmp_path: Path) -> None:
    plan = make_plan(tmp_path, make_dag(tmp_path))
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    stats = tmp_path / "stats.json"
    command = [sys.executable, "-m", "codedag", "-q", "migrate", str(plan), "--stats-out"]
    command += [str(stats), "--", "python", str(script)]
    run = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert run.stdout is not None
        assert run.stdout.readline().strip() == "ready"
        run.send_signal(signal.SIGTERM)
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode == 143, err
    assert "cleanup ran" in out
    assert err.rstrip().splitlines()[-1] == "codedag migrate: interrupted by SIGTERM"
    assert "functions" in json.loads(stats.read_text())  # written on the way out

"""A loop that raises and a loop stopped by Ctrl-C (SIGINT) both leave a complete results JSON."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.results import load_results

SCRIPT = textwrap.dedent(
    """
    import sys, time
    from codedag.monitor.experiment import ExperimentMonitor

    run_dir, how = sys.argv[1], sys.argv[2]
    monitor = ExperimentMonitor(
        "crash", run_dir=run_dir, flush_interval_s=3600, handle_sigterm=how == "sigterm"
    )
    monitor.start_mode("baseline", config={"how": how}, resource_interval=0.01)
    batch = 0
    while True:
        monitor.start_batch()
        time.sleep(0.002)
        monitor.end_batch()
        monitor.log_loss(0, batch, 1.0 / (batch + 1))
        batch += 1
        if batch == 20:
            if how == "raise":
                raise ValueError("loss is NaN")
            print("ready", flush=True)
    """
)


def run_script(tmp_path: Path, how: str) -> tuple[subprocess.CompletedProcess[str], Path]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    run_dir = tmp_path / "run"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(script), str(run_dir), how],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    if how in ("sigint", "sigterm"):
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready"
        proc.send_signal(signal.SIGINT if how == "sigint" else signal.SIGTERM)
    try:
        out, err = proc.communicate(timeout=60)
    finally:
        proc.kill()
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err), run_dir


def check_complete(run_dir: Path, status: str, error: str) -> dict:
    data = load_results(run_dir / "results.json")
    mode = data["modes"]["baseline"]
    assert mode["status"] == status and error in (mode["error"] or "")
    assert mode["ended_at"] is not None
    assert mode["summary"]["num_batches"] >= 20
    assert len(mode["batch_times"]) == mode["summary"]["num_batches"]
    assert len(mode["metrics"]["losses"]) >= 20
    assert mode["summary"]["resources"]["samples"] >= 1
    # the raw batch stream was flushed and closed too: one row per recorded batch
    rows = (run_dir / mode["files"]["batches"]).read_text().splitlines()
    assert len(rows) - 1 == mode["summary"]["num_batches"]
    return data


def test_exception_in_the_loop_leaves_a_failed_complete_json(tmp_path: Path) -> None:
    proc, run_dir = run_script(tmp_path, "raise")
    assert proc.returncode == 1 and "ValueError: loss is NaN" in proc.stderr
    check_complete(run_dir, "failed", "ValueError: loss is NaN")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_leaves_an_interrupted_complete_json(tmp_path: Path) -> None:
    proc, run_dir = run_script(tmp_path, "sigint")
    assert proc.returncode != 0 and "KeyboardInterrupt" in proc.stderr
    check_complete(run_dir, "interrupted", "KeyboardInterrupt")


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigterm_with_handle_sigterm_leaves_an_interrupted_complete_json(tmp_path: Path) -> None:
    proc, run_dir = run_script(tmp_path, "sigterm")
    assert proc.returncode == 143
    check_complete(run_dir, "interrupted", "SIGTERM")


def test_sigterm_handler_is_restored_after_the_mode(tmp_path: Path) -> None:
    before = signal.getsignal(signal.SIGTERM)
    monitor = ExperimentMonitor("t", run_dir=tmp_path, stream_to_disk=False, handle_sigterm=True)
    monitor.start_mode("a", resource_interval=None)
    assert signal.getsignal(signal.SIGTERM) is not before
    monitor.stop_mode()
    assert signal.getsignal(signal.SIGTERM) is before


def test_mode_context_records_the_exception_in_process(tmp_path: Path) -> None:
    monitor = ExperimentMonitor("ctx", run_dir=tmp_path, stream_to_disk=False)
    with pytest.raises(RuntimeError), monitor.mode("baseline", resource_interval=None):
        for _ in range(3):
            monitor.start_batch()
            monitor.end_batch()
        raise RuntimeError("CUDA out of memory")
    mode = load_results(monitor.results_path)["modes"]["baseline"]
    assert mode["status"] == "failed" and "out of memory" in mode["error"]
    assert mode["summary"]["num_batches"] == 3

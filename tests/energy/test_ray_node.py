"""Node-side parts of the Ray executor that need no cluster: windows, cooldown, files, watchdog."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil
import pytest

from codedag.cli.main import main
from codedag.energy.meters import CpuEnergyMeter, CpuEnergyReading
from codedag.energy.ray_node import (
    OVERLAP_REASON,
    EnergyWindows,
    FileCooldown,
    NodeCpuMeter,
    read_files,
)
from codedag.energy.settings import BatchSettings


class CountingMeter(CpuEnergyMeter):
    source = "rapl"

    def stop(self) -> CpuEnergyReading:
        return CpuEnergyReading("rapl", 10.0, 1.0, 11.0, None, {"package-0": 10.0})


def test_a_cpu_reading_shared_with_another_experiment_is_refused(tmp_path: Path) -> None:
    windows = EnergyWindows(tmp_path)
    alone = NodeCpuMeter(CountingMeter(), windows)
    alone.start()
    assert alone.stop().total_j == 11.0  # nothing else ran on this node
    first, second = NodeCpuMeter(CountingMeter(), windows), NodeCpuMeter(CountingMeter(), windows)
    first.start()
    second.start()
    later = second.stop()
    earlier = first.stop()
    for reading in (earlier, later):
        assert reading.total_j is None and reading.reason == OVERLAP_REASON
        assert reading.metrics()["cpu_energy_source"] == "unavailable"
    after = NodeCpuMeter(CountingMeter(), windows)
    after.start()
    assert after.stop().total_j == 11.0  # closed windows in the past do not count


def test_a_window_left_open_by_a_dead_process_ends_at_its_last_write(tmp_path: Path) -> None:
    windows = EnergyWindows(tmp_path)
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True, check=True)  # fmt: skip
    (tmp_path / "old.json").write_text(
        json.dumps({"pid": int(dead.stdout), "start": time.time() - 100, "end": None})
    )
    os.utime(tmp_path / "old.json", (time.time() - 50, time.time() - 50))
    mine = windows.begin()
    assert windows.end(mine) is False


def test_file_cooldown_waits_what_is_left_and_honours_stop(tmp_path: Path) -> None:
    cooldown = FileCooldown(tmp_path)
    stop = threading.Event()
    started = time.monotonic()
    assert cooldown.wait("GPU-1", 5.0, stop)  # nothing ran here yet: no wait
    assert time.monotonic() - started < 1.0
    cooldown.mark("GPU-1")
    started = time.monotonic()
    assert cooldown.wait("GPU-1", 0.4, stop)
    assert 0.3 <= time.monotonic() - started < 3.0
    assert FileCooldown(tmp_path).wait("GPU-2", 5.0, stop)  # per key
    threading.Timer(0.2, stop.set).start()
    cooldown.mark("GPU-1")
    assert cooldown.wait("GPU-1", 30.0, stop) is False


def test_read_files_keeps_the_folder_layout(tmp_path: Path) -> None:
    (tmp_path / "energy").mkdir()
    (tmp_path / "training.log").write_text("line\n")
    (tmp_path / "energy" / "cpu_energy.json").write_bytes(b"{}")
    assert read_files(tmp_path) == {"energy/cpu_energy.json": b"{}", "training.log": b"line\n"}


VICTIM = """
import sys, threading, time
from pathlib import Path
from codedag.energy.process import run_command
from codedag.energy.ray_reaper import GroupReaper

CHILD = (
    "import subprocess, sys, time; "
    "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
    "print('child', c.pid, flush=True); time.sleep(600)"
)
with GroupReaper(grace_s=1.0) as reaper:
    if sys.argv[2] == "kill-me":
        threading.Thread(
            target=run_command, args=([sys.executable, "-c", CHILD], Path(sys.argv[1])),
            kwargs={"registry": reaper}, daemon=True,
        ).start()
        time.sleep(600)
    run_command([sys.executable, "-c", "print('child 0')"], Path(sys.argv[1]), registry=reaper)
print("done", flush=True)
"""


def _running(pid: int) -> bool:
    """Whether ``pid`` runs (not a zombie); a process that ends while asked has ended."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _watchdogs(worker: int) -> list[psutil.Process]:
    out = []
    for proc in psutil.process_iter(["cmdline", "status"]):
        cmd = proc.info["cmdline"] or []
        ours = "codedag.energy.ray_reaper" in cmd and str(worker) in cmd
        if ours and proc.info["status"] != psutil.STATUS_ZOMBIE:
            out.append(proc)
    return out


def test_the_watchdog_ends_the_groups_of_a_killed_worker(tmp_path: Path) -> None:
    script = tmp_path / "victim.py"
    script.write_text(textwrap.dedent(VICTIM))
    log = tmp_path / "training.log"
    worker = subprocess.Popen([sys.executable, str(script), str(log), "kill-me"])
    try:
        deadline = time.monotonic() + 60
        while "child " not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        grandchild = int(log.read_text().split("child ")[1].split()[0])
        leader = psutil.Process(grandchild).ppid()
        assert _watchdogs(worker.pid), "no watchdog"
        worker.send_signal(signal.SIGKILL)  # no Python code of the worker runs any more
        worker.wait()
        deadline = time.monotonic() + 20
        while any(_running(p) for p in (leader, grandchild)):
            assert time.monotonic() < deadline, "the training group outlived its worker"
            time.sleep(0.1)
        while _watchdogs(worker.pid):
            assert time.monotonic() < deadline, "the watchdog did not exit"
            time.sleep(0.1)
    finally:
        if worker.poll() is None:
            worker.kill()


def test_the_watchdog_leaves_with_a_worker_that_ends_normally(tmp_path: Path) -> None:
    script = tmp_path / "victim.py"
    script.write_text(textwrap.dedent(VICTIM))
    worker = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path / "log"), "normal"],
        stdout=subprocess.PIPE,
        text=True,
    )
    out, _ = worker.communicate(timeout=60)
    assert worker.returncode == 0 and "done" in out
    assert "child 0" in (tmp_path / "log").read_text()
    deadline = time.monotonic() + 10
    while _watchdogs(worker.pid):
        assert time.monotonic() < deadline, "the watchdog outlived its worker"
        time.sleep(0.1)


def test_settings_name_the_executor() -> None:
    base = {"experiment_name": "x", "experiments": [{"repo": "examples", "model": "mnist_cnn"}]}
    assert BatchSettings.model_validate(base).executor.kind == "local"
    short = BatchSettings.model_validate({**base, "executor": "ray"})
    assert (short.executor.kind, short.executor.address, short.executor.node_retries) == (
        "ray",
        None,
        3,
    )
    full = BatchSettings.model_validate(
        {**base, "executor": {"kind": "ray", "address": "auto", "cpus_per_experiment": 2}}
    )
    assert (full.executor.address, full.executor.cpus_per_experiment) == ("auto", 2.0)


@pytest.mark.parametrize(
    ("settings", "flags", "expected"),
    [
        ({"executor": "slurm"}, [], "executor.kind"),
        ({"executor": {"kind": "ray", "adress": "auto"}}, [], "executor.adress: unknown key"),
        ({}, ["--address", "auto"], "--address only apply with --executor ray"),
        ({}, ["--executor", "ray", "--node-retries", "-1"], "--node-retries: must be >= 0"),
    ],
)
def test_bad_executor_settings_exit_2_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], settings: dict, flags: list, expected: str
) -> None:
    path = tmp_path / "s.json"
    experiments = [{"repo": "examples", "model": "mnist_cnn"}]
    path.write_text(json.dumps({"experiment_name": "x", "experiments": experiments, **settings}))
    try:
        code = main(["mutate", "-ec", str(path), *flags, "--results-dir", str(tmp_path / "r")])
    except SystemExit as exit_:  # flag values are checked by the parser
        code = exit_.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and expected in err and "\n" not in err, err
    assert not list((tmp_path / "r").glob("run_*"))  # no session was started


def test_an_unreachable_cluster_is_one_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pytest.importorskip("ray", reason="the ray extra is not installed")
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again before the session tries it
    argv = ["mutate", "-r", "examples", "-m", "mnist_cnn", "--executor", "ray"]
    argv += ["--address", f"127.0.0.1:{port}", "--results-dir", str(tmp_path / "r")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert f"cannot reach the Ray cluster at 127.0.0.1:{port}" in err and "\n" not in err
    assert not list((tmp_path / "r").glob("run_*"))  # no session was started

"""The process-group runner: output to the log, timeouts and leftovers end the whole group."""

from __future__ import annotations

import sys
import textwrap
import threading
from pathlib import Path

import psutil

from codedag.energy.process import ProcessRegistry, group_members, run_command

HANG = textwrap.dedent(
    """
    import os, subprocess, sys, time
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("child", child.pid, os.getpgid(0), flush=True)
    time.sleep(600)
    """
)


def pids_in_log(log: Path) -> list[int]:
    return [
        int(line.split()[1]) for line in log.read_text().splitlines() if line.startswith("child")
    ]


def test_output_goes_to_log_and_echo(tmp_path: Path) -> None:
    echo_path = tmp_path / "echo.txt"
    with open(echo_path, "w") as echo:
        result = run_command(
            [sys.executable, "-c", "print('hello'); print('world')"], tmp_path / "t.log", echo=echo
        )
    assert result.exit_code == 0 and not result.timed_out
    assert (tmp_path / "t.log").read_text() == "hello\nworld\n"
    assert echo_path.read_text() == "hello\nworld\n"


def test_timeout_ends_the_whole_group(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    registry = ProcessRegistry()
    log = tmp_path / "t.log"
    result = run_command(
        [sys.executable, str(script)], log, timeout_s=1.5, registry=registry, grace_s=1.0
    )
    assert result.timed_out and result.exit_code is None
    (child,) = pids_in_log(log)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    pgid = int(log.read_text().split()[2])
    assert group_members(pgid) == []  # psutil finds no live process of the group
    assert registry.live() == []


def test_children_left_behind_after_a_normal_exit_are_ended(tmp_path: Path) -> None:
    code = (
        "import subprocess, sys, os; "
        "c = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)']); "
        "print('child', c.pid, os.getpgid(0), flush=True)"
    )
    log = tmp_path / "t.log"
    result = run_command([sys.executable, "-c", code], log, grace_s=1.0)
    assert result.exit_code == 0
    line = log.read_text().split()
    pgid = int(line[2])
    assert group_members(pgid) == []


def test_stop_event_ends_the_group(tmp_path: Path) -> None:
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    stop = threading.Event()
    timer = threading.Timer(1.0, stop.set)
    timer.start()
    result = run_command([sys.executable, str(script)], tmp_path / "t.log", stop=stop, grace_s=1.0)
    timer.join()
    assert result.exit_code is None and not result.timed_out
    (child,) = pids_in_log(tmp_path / "t.log")
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE


def test_background_load_is_stopped_when_the_foreground_is_interrupted(
    tmp_path: Path, toy: Path
) -> None:
    import time

    import pytest

    from codedag.energy.background import BackgroundLoad

    log = tmp_path / "background.log"
    argv = [sys.executable, str(tmp_path / "toy" / "sleepy.py"), "--epochs", "60"]
    with pytest.raises(KeyboardInterrupt), BackgroundLoad(argv, log) as load:
        deadline = time.monotonic() + 30
        while "child" not in (log.read_text() if log.exists() else ""):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        raise KeyboardInterrupt
    (child,) = pids_in_log(log)
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == psutil.STATUS_ZOMBIE
    assert load.info()["runs"] == 1

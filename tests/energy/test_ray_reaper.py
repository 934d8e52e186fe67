"""The watchdog of a Ray task's training processes (codedag.energy.ray_reaper), without Ray.

A worker killed right after starting its training must leave nothing behind, whether or not the
watchdog's periodic look at the worker's descendants came round in between.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import psutil

from codedag.energy.ray_reaper import DONE, watch

# The training group is registered the way run_command does it (a ProcessTree), and the worker is
# SIGKILLed at once: only what the task told the watchdog through the pipe can end the group.
KILLED_AT_ONCE = """
import os, signal, subprocess, sys
from codedag.energy.process import ProcessTree
from codedag.energy.ray_reaper import GroupReaper

with GroupReaper(grace_s=1.0) as reaper:
    run = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    reaper.add(ProcessTree(run.pid))
    print(run.pid, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
"""


def _gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def _wait_gone(pid: int, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not _gone(pid):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


def _sleeper() -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True
    )


def test_a_registered_training_group_ends_with_a_worker_killed_at_once(tmp_path: Path) -> None:
    script = tmp_path / "worker.py"
    script.write_text(textwrap.dedent(KILLED_AT_ONCE))
    worker = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60
    )
    assert worker.returncode == -signal.SIGKILL, worker.stderr
    training = int(worker.stdout.split()[0])
    try:
        assert _wait_gone(training, 30), "the training group outlived its killed worker"
    finally:
        if not _gone(training):
            os.killpg(training, signal.SIGKILL)


def _watch_in_thread(worker: int) -> tuple[threading.Thread, int]:
    read_fd, write_fd = os.pipe()
    stream = os.fdopen(read_fd, "r")
    thread = threading.Thread(target=watch, args=(worker, 1.0, stream), daemon=True)
    thread.start()
    return thread, write_fd


def test_a_pipe_closed_without_done_ends_the_groups_even_if_the_worker_still_shows_alive() -> None:
    # A SIGKILLed worker closes its descriptors before it turns into a zombie: the watchdog must
    # not take the worker's state at that moment for a normal end.
    worker, training = _sleeper(), _sleeper()
    try:
        thread, write_fd = _watch_in_thread(worker.pid)
        os.write(write_fd, f"+{training.pid}\n".encode())
        os.close(write_fd)
        thread.join(30)
        assert not thread.is_alive()
        assert _wait_gone(training.pid, 10)
        assert not _gone(worker.pid)  # the worker's own group is never ended by its watchdog
    finally:
        for proc in (worker, training):
            proc.kill()
            proc.wait()


def test_a_task_that_says_done_keeps_its_worker_and_ended_groups_alone() -> None:
    worker, training = _sleeper(), _sleeper()
    try:
        thread, write_fd = _watch_in_thread(worker.pid)
        os.write(write_fd, f"+{training.pid}\n-{training.pid}\n{DONE}\n".encode())
        os.close(write_fd)
        thread.join(30)
        assert not thread.is_alive()
        # the group was discarded before "done": it is not the watchdog's to end
        assert not _gone(training.pid) and not _gone(worker.pid)
    finally:
        for proc in (worker, training):
            proc.kill()
            proc.wait()

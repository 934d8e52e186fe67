"""Every process a training run starts ends with it: other sessions, re-parented, pipe holders.

The training script below starts a grandchild in a new session (``start_new_session``, what
``setsid`` does) in several ways; each test checks with psutil that nothing is left alive and that
the caller never blocks on the output pipe the grandchild keeps open.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psutil
import pytest

from codedag.energy.process import ProcessRegistry, ProcessTree, run_command

ESCAPER = textwrap.dedent(
    """
    import argparse, os, signal, subprocess, sys, time
    p = argparse.ArgumentParser()
    p.add_argument("--epochs", type=int, default=0)
    p.add_argument("--lr", type=float, default=0.1)
    how = p.parse_args().epochs
    sleeper = [sys.executable, "-c", "import time; time.sleep(600)"]
    if how == 1:  # a new session that keeps our stdout pipe; we hang
        child = subprocess.Popen(sleeper, start_new_session=True)
    elif how in (2, 4):  # a new session, output to /dev/null; we exit at once (2) or hang (4)
        child = subprocess.Popen(sleeper, start_new_session=True, stdout=subprocess.DEVNULL)
    else:  # 3: a new session and an empty environment; we exit a little later
        child = subprocess.Popen(
            sleeper, start_new_session=True, stdout=subprocess.DEVNULL, env={}
        )
    with open(os.path.join(os.path.dirname(__file__), "grandchildren"), "a") as f:
        f.write(f"{child.pid}\\n")
    print("started", child.pid, flush=True)
    if how == 4:  # we ignore SIGTERM too: only SIGKILL ends us
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if how in (1, 4):
        time.sleep(600)
    if how == 3:
        time.sleep(1.0)
    print("Training complete")
    """
)
HOW = {"hang": 1, "detach": 2, "no_env": 3, "stubborn": 4}


@pytest.fixture
def escaper(tmp_path: Path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "escaper.py").write_text(ESCAPER)
    return repo


def grandchildren(repo: Path) -> list[int]:
    path = repo / "grandchildren"
    return [int(p) for p in path.read_text().split()] if path.exists() else []


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def wait_for(predicate, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline, "timed out waiting"
        time.sleep(0.05)


def run_escaper(repo: Path, how: str, **kwargs):
    argv = [sys.executable, str(repo / "escaper.py"), "--epochs", str(HOW[how])]
    registry = ProcessRegistry()
    start = time.monotonic()
    result = run_command(argv, repo / "train.log", registry=registry, grace_s=1.0, **kwargs)
    assert registry.live() == []
    return result, time.monotonic() - start


def test_timeout_with_a_new_session_keeping_the_pipe_does_not_hang(escaper: Path) -> None:
    result, took_s = run_escaper(escaper, "hang", timeout_s=1.0)
    assert result.timed_out and result.exit_code is None
    (pid,) = grandchildren(escaper)
    assert gone(pid)
    assert took_s < 10  # timeout + grace, never a wait on the pipe the grandchild held
    assert "started" in (escaper / "train.log").read_text()


def test_new_session_with_output_elsewhere_ends_after_a_normal_exit(escaper: Path) -> None:
    result, _ = run_escaper(escaper, "detach")
    assert result.exit_code == 0
    (pid,) = grandchildren(escaper)
    assert gone(pid)  # found by the run's token after it was re-parented


def test_new_session_without_our_environment_is_found_by_the_snapshots(escaper: Path) -> None:
    result, _ = run_escaper(escaper, "no_env")
    assert result.exit_code == 0
    (pid,) = grandchildren(escaper)
    assert gone(pid)


def test_tree_never_includes_the_caller_or_its_ancestors() -> None:
    # its children may be members (a multiprocessing resource tracker an earlier test started)
    tree = ProcessTree(os.getpid(), token=None)
    protected = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
    assert not protected & {p.pid for p in tree.members()}


def mutate(tmp_path: Path, repo: Path, model: str, *extra: str) -> subprocess.Popen[str]:
    config = {
        "repositories": {
            "esc": {
                "path": str(repo),
                "train_script": "escaper.py",
                "models": {name: {"defaults": {"epochs": how}} for name, how in HOW.items()},
                "supported_hyperparams": {
                    "epochs": {"flag": "--epochs", "type": "int", "default": 0},
                },
                "success_patterns": ["Training complete"],
            }
        }
    }
    models = tmp_path / "models.json"
    models.write_text(json.dumps(config))
    command = [sys.executable, "-m", "codedag", "mutate", "-r", "esc", "-m", model]
    command += ["--models-config", str(models), "--results-dir", str(tmp_path / "results")]
    command += ["--cooldown", "0", "-mr", "0", "--no-echo", *extra]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def finish(session: subprocess.Popen[str], timeout_s: float) -> tuple[str, str]:
    try:
        return session.communicate(timeout=timeout_s)
    finally:
        if session.poll() is None:
            session.kill()


def test_mutate_timeout_ends_the_grandchild_and_returns(tmp_path: Path, escaper: Path) -> None:
    session = mutate(tmp_path, escaper, "hang", "--timeout", "1")
    out, err = finish(session, 30)
    assert session.returncode == 1, err  # the run failed: it timed out
    (pid,) = grandchildren(escaper)
    assert gone(pid)
    assert "timed out" in out


@pytest.mark.parametrize(
    ("model", "signame"),
    [("hang", "SIGINT"), ("hang", "SIGTERM"), ("stubborn", "SIGINT")],
)
def test_mutate_interrupted_while_a_grandchild_holds_the_pipe(
    tmp_path: Path, escaper: Path, model: str, signame: str
) -> None:
    session = mutate(tmp_path, escaper, model)
    wait_for(lambda: bool(grandchildren(escaper)))
    (pid,) = grandchildren(escaper)
    leader = psutil.Process(pid).ppid()
    session.send_signal(getattr(signal, signame))
    if model == "stubborn":  # the leader ignores SIGTERM: a second Ctrl-C skips the grace period
        time.sleep(0.5)
        session.send_signal(signal.SIGINT)
    start = time.monotonic()
    _, err = finish(session, 30)
    assert session.returncode == 130, err
    assert time.monotonic() - start < 4.5  # responsive: never the 5 s grace, never a hang
    assert gone(pid) and gone(leader)
    info = json.loads(next((tmp_path / "results").glob("run_*/session.json")).read_text())
    assert info["status"] == "interrupted"

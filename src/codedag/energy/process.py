"""Running a training command so that nothing outlives it, in any session or process group.

The command runs as an argument list (no shell) in its own session and process group, with a
token in its environment (``CODEDAG_RUN_TOKEN``) that every process it starts inherits. Its stdout
is streamed to ``training.log`` and to the terminal; its stderr stays the terminal's, so progress
bars keep detecting the TTY.

A process of the run may leave the group (``setsid``, ``start_new_session``) and be re-parented
when its parent exits, so the run is tracked three ways (:class:`ProcessTree`): the leader's
descendants, snapshotted while it runs; the members of its process group; and every process that
carries its token. On timeout, Ctrl-C, or any error, all of them get SIGTERM, then SIGKILL after a
grace period (at once on a second Ctrl-C); the call returns when none is left (zombies excepted).
Output is read with a timeout, so a process that keeps the pipe open never blocks the caller.
Every live run is also kept in a registry so that a session can end all of them from its main
thread.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import logging
import os
import select
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import psutil

from codedag.errors import ExperimentError
from codedag.util.io import open_no_follow

log = logging.getLogger(__name__)

TERM_GRACE_S = 5.0
KILL_WAIT_S = 5.0
RUN_TOKEN_ENV = "CODEDAG_RUN_TOKEN"
SNAPSHOT_INTERVAL_S = 0.25


@dataclass
class CommandResult:
    """What happened to one command."""

    argv: list[str]
    exit_code: int | None
    duration_s: float
    timed_out: bool
    start_unix_s: float
    end_unix_s: float


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def group_members(pgid: int) -> list[psutil.Process]:
    """Processes of process group ``pgid`` that are still alive (zombies are not counted)."""
    members = []
    for proc in psutil.process_iter(["status"]):
        try:
            if os.getpgid(proc.pid) == pgid and proc.info["status"] != psutil.STATUS_ZOMBIE:
                members.append(proc)
        except (ProcessLookupError, psutil.NoSuchProcess, PermissionError):
            continue
    return members


def token_carriers(token: str) -> list[psutil.Process]:
    """Live processes whose environment holds ``CODEDAG_RUN_TOKEN=token`` (ours only)."""
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.environ().get(RUN_TOKEN_ENV) == token and _alive(proc):
                found.append(proc)
        except psutil.Error:  # gone, a zombie, or another user's process
            continue
    return found


class ProcessTree:
    """Every process a command started: its group, its descendants and its token's carriers.

    Args:
        leader: pid of the command, leader of its own process group.
        token: the run's ``CODEDAG_RUN_TOKEN`` value, or None for a command started without one.
    """

    def __init__(self, leader: int, token: str | None = None) -> None:
        self.leader = leader
        self.token = token
        self._seen: dict[int, psutil.Process] = {}
        self._lock = threading.Lock()
        self.snapshot()

    def snapshot(self) -> None:
        """Remember the leader and its descendants now, so they stay known once re-parented."""
        try:
            root = psutil.Process(self.leader)
            found = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        with self._lock:
            for proc in found:
                self._seen.setdefault(proc.pid, proc)

    def members(self) -> list[psutil.Process]:
        """The live processes of the run (never this process or its ancestors)."""
        with self._lock:
            found = {pid: p for pid, p in self._seen.items() if _alive(p)}
        for proc in group_members(self.leader):
            found.setdefault(proc.pid, proc)
        if self.token is not None:
            for proc in token_carriers(self.token):
                found.setdefault(proc.pid, proc)
        for proc in list(found.values()):
            try:
                for child in proc.children(recursive=True):
                    found.setdefault(child.pid, child)
            except psutil.Error:
                continue
        protected = {os.getpid(), *(p.pid for p in psutil.Process().parents())}
        return [p for pid, p in sorted(found.items()) if pid not in protected and _alive(p)]

    def terminate(self, grace_s: float = TERM_GRACE_S) -> bool:
        """SIGTERM every member, SIGKILL what is left after ``grace_s`` (at once on Ctrl-C).

        Returns:
            True when no process of the run is left.
        """
        try:
            return self._end(signal.SIGTERM, grace_s) or self._end(signal.SIGKILL, KILL_WAIT_S)
        except KeyboardInterrupt:  # asked again: no more grace
            self._end(signal.SIGKILL, KILL_WAIT_S)
            raise

    def _end(self, sig: int, wait_s: float) -> bool:
        deadline = time.monotonic() + wait_s
        signalled: set[int] = set()
        while True:
            members = self.members()
            if not members:
                return True
            for proc in members:
                if proc.pid not in signalled:
                    signalled.add(proc.pid)
                    with contextlib.suppress(psutil.Error):
                        proc.send_signal(sig)
            if time.monotonic() >= deadline:
                if sig == signal.SIGKILL:
                    log.error("processes survived SIGKILL: %s", [p.pid for p in members])
                return False
            time.sleep(0.05)


class ProcessRegistry:
    """The runs a session started and has not ended yet (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._trees: dict[int, ProcessTree] = {}
        self._exit_hook = False

    def add(self, run: ProcessTree | int) -> None:
        """Record a live run (or a bare process group); the first installs an exit hook."""
        tree = run if isinstance(run, ProcessTree) else ProcessTree(run)
        with self._lock:
            self._trees[tree.leader] = tree
            if not self._exit_hook:
                atexit.register(self.terminate_all, 1.0)
                self._exit_hook = True

    def discard(self, run: ProcessTree | int) -> None:
        """Forget a run that ended."""
        leader = run.leader if isinstance(run, ProcessTree) else run
        with self._lock:
            self._trees.pop(leader, None)

    def live(self) -> list[int]:
        """Leader pids of the runs still recorded."""
        with self._lock:
            return sorted(self._trees)

    def terminate_all(self, grace_s: float = TERM_GRACE_S) -> None:
        """End every recorded run (TERM, then KILL)."""
        with self._lock:
            trees = list(self._trees.values())
        for tree in trees:
            tree.terminate(grace_s)
            self.discard(tree)


REGISTRY = ProcessRegistry()


def _pump(fd: int, log_file: TextIO, echo: TextIO | None, stop: threading.Event) -> None:
    """Copy the child's output to the log (and ``echo``) until EOF, or until ``stop`` is set.

    Reads with a timeout, so a process that keeps the pipe open never blocks the caller.
    """
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    try:
        while True:
            ready, _, _ = select.select([fd], [], [], 0.1)
            if not ready:
                if stop.is_set():
                    break
                continue
            chunk = os.read(fd, 1 << 16)
            text = decoder.decode(chunk, final=not chunk)
            if text:
                log_file.write(text)
                log_file.flush()
                if echo is not None:
                    try:
                        echo.write(text)
                        echo.flush()
                    except (OSError, ValueError):  # terminal gone; the log still gets everything
                        echo = None
            if not chunk:
                break
    except (OSError, ValueError) as error:  # the pipe or the log was closed under us
        log.debug("output pump stopped: %s", error)


def run_command(
    argv: Sequence[str],
    log_path: Path,
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout_s: float | None = None,
    echo: TextIO | None = None,
    stop: threading.Event | None = None,
    registry: ProcessRegistry = REGISTRY,
    grace_s: float = TERM_GRACE_S,
) -> CommandResult:
    """Run ``argv`` in its own session, streaming stdout to ``log_path`` and ``echo``.

    Args:
        argv: program and arguments; no shell is involved.
        log_path: file that receives the child's stdout (appended).
        cwd: working directory of the child.
        env: full environment of the child (default: ours, with PYTHONUNBUFFERED=1).
        timeout_s: end the run after this many seconds (None: no limit).
        echo: stream that also receives stdout (the terminal), or None.
        stop: when set from another thread, the run is ended and the call returns.
        registry: where the live run is recorded while it runs.
        grace_s: seconds between SIGTERM and SIGKILL.

    Returns:
        The exit code (None if the run was ended), the duration and whether it timed out.

    Raises:
        ExperimentError: the program cannot be started.
        KeyboardInterrupt: re-raised after every process of the run was ended.
    """
    token = uuid.uuid4().hex
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    child_env[RUN_TOKEN_ENV] = token
    log_path.parent.mkdir(parents=True, exist_ok=True)
    fd = open_no_follow(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # never via a link
    with os.fdopen(fd, "a", encoding="utf-8", errors="replace") as log_file:
        start_unix, start = time.time(), time.monotonic()
        proc = _start(argv, cwd, child_env)
        tree = ProcessTree(proc.pid, token)  # start_new_session: the child leads its group
        registry.add(tree)
        assert proc.stdout is not None
        pump_stop = threading.Event()
        pump = threading.Thread(
            target=_pump,
            args=(proc.stdout.fileno(), log_file, echo, pump_stop),
            name="output-pump",
            daemon=True,
        )
        pump.start()
        try:
            deadline = None if timeout_s is None else start + timeout_s
            timed_out = _watch(proc, tree, deadline, stop)
            if timed_out:
                log.warning("%s timed out after %.0f s; ending its processes", argv[0], timeout_s)
        finally:
            # Always end the run: also processes the leader left behind after a normal exit.
            try:
                tree.terminate(grace_s)
            finally:
                registry.discard(tree)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=KILL_WAIT_S)
                pump_stop.set()
                pump.join(timeout=2.0)
                if pump.is_alive():  # pragma: no cover - the pump reads with a timeout
                    log.error("output of %s is still being read; leaving its pipe open", argv[0])
                else:
                    proc.stdout.close()
        end = time.monotonic()
        exit_code = None if (timed_out or proc.returncode is None) else proc.returncode
        if stop is not None and stop.is_set() and exit_code is not None and exit_code < 0:
            exit_code = None
        return CommandResult(list(argv), exit_code, end - start, timed_out, start_unix, time.time())


def _start(argv: Sequence[str], cwd: Path | None, env: dict[str, str]) -> subprocess.Popen[bytes]:
    """The child in its own session, stdout piped, stdin closed, stderr inherited."""
    try:
        return subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=None,
            start_new_session=True,
        )
    except OSError as error:
        raise ExperimentError(f"cannot start {argv[0]!r}: {error.strerror}") from error


def _watch(
    proc: subprocess.Popen[bytes],
    tree: ProcessTree,
    deadline: float | None,
    stop: threading.Event | None,
) -> bool:
    """Wait for the child, snapshotting its process tree; whether the deadline ended the wait."""
    next_snapshot = 0.0
    while proc.poll() is None:
        now = time.monotonic()
        if deadline is not None and now >= deadline:
            return True
        if stop is not None and stop.is_set():
            return False
        if now >= next_snapshot:
            tree.snapshot()
            next_snapshot = now + SNAPSHOT_INTERVAL_S
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=0.1)
    return False

"""Running a training command so that nothing outlives it.

The command runs as an argument list (no shell) in its own session and process group. Its stdout
is streamed line by line to ``training.log`` and to the terminal; its stderr stays the terminal's,
so progress bars keep detecting the TTY. On timeout, Ctrl-C, or any error, the whole group gets
SIGTERM, then SIGKILL after a grace period, and the call returns only when no process of the group
is left (zombies excepted). Every live group is also kept in a registry so that a session can end
all of them at once from its main thread.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import psutil

from codedag.errors import ExperimentError

log = logging.getLogger(__name__)

TERM_GRACE_S = 5.0


@dataclass
class CommandResult:
    """What happened to one command."""

    argv: list[str]
    exit_code: int | None
    duration_s: float
    timed_out: bool
    start_unix_s: float
    end_unix_s: float


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


def terminate_group(pgid: int, grace_s: float = TERM_GRACE_S) -> bool:
    """Send SIGTERM to a process group, then SIGKILL to what is left after ``grace_s``.

    Returns:
        True when the group is gone (no live member), False if something survived SIGKILL.
    """
    for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(pgid, sig)
        except ProcessLookupError:
            return True
        except PermissionError as error:  # pragma: no cover - someone else's group
            log.warning("cannot signal process group %d: %s", pgid, error)
            return False
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            if not group_members(pgid):
                return True
            time.sleep(0.05)
    left = group_members(pgid)
    if left:
        log.error("process group %d survived SIGKILL: %s", pgid, [p.pid for p in left])
    return not left


class ProcessRegistry:
    """The process groups a session started and has not ended yet (thread-safe)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._groups: set[int] = set()
        self._exit_hook = False

    def add(self, pgid: int) -> None:
        """Record a live group; the first one installs an exit hook that ends any left over."""
        with self._lock:
            self._groups.add(pgid)
            if not self._exit_hook:
                atexit.register(self.terminate_all, 1.0)
                self._exit_hook = True

    def discard(self, pgid: int) -> None:
        with self._lock:
            self._groups.discard(pgid)

    def live(self) -> list[int]:
        with self._lock:
            return sorted(self._groups)

    def terminate_all(self, grace_s: float = TERM_GRACE_S) -> None:
        """End every registered group (TERM, then KILL)."""
        for pgid in self.live():
            terminate_group(pgid, grace_s)
            self.discard(pgid)


REGISTRY = ProcessRegistry()


def _pump(stream: TextIO, log_file: TextIO, echo: TextIO | None) -> None:
    try:
        for line in stream:
            log_file.write(line)
            log_file.flush()
            if echo is not None:
                try:
                    echo.write(line)
                    echo.flush()
                except (OSError, ValueError):  # terminal gone; the log still gets everything
                    echo = None
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
    """Run ``argv`` in its own process group, streaming stdout to ``log_path`` and ``echo``.

    Args:
        argv: program and arguments; no shell is involved.
        log_path: file that receives the child's stdout (appended).
        cwd: working directory of the child.
        env: full environment of the child (default: ours, with PYTHONUNBUFFERED=1).
        timeout_s: end the group after this many seconds (None: no limit).
        echo: stream that also receives stdout (the terminal), or None.
        stop: when set from another thread, the group is ended and the call returns.
        registry: where the live group is recorded while it runs.
        grace_s: seconds between SIGTERM and SIGKILL.

    Returns:
        The exit code (None if the group was ended), the duration and whether it timed out.

    Raises:
        ExperimentError: the program cannot be started.
        KeyboardInterrupt: re-raised after the group was ended.
    """
    child_env = dict(os.environ if env is None else env)
    child_env.setdefault("PYTHONUNBUFFERED", "1")
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with open(log_path, "a", encoding="utf-8", errors="replace") as log_file:
        start_unix, start = time.time(), time.monotonic()
        try:
            proc = subprocess.Popen(
                list(argv),
                cwd=cwd,
                env=child_env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=None,
                text=True,
                bufsize=1,
                errors="replace",
                start_new_session=True,
            )
        except OSError as error:
            raise ExperimentError(f"cannot start {argv[0]!r}: {error.strerror}") from error
        pgid = proc.pid  # start_new_session makes the child its group's leader
        registry.add(pgid)
        pump = threading.Thread(target=_pump, args=(proc.stdout, log_file, echo), daemon=True)
        pump.start()
        timed_out = False
        try:
            deadline = None if timeout_s is None else start + timeout_s
            while proc.poll() is None:
                if deadline is not None and time.monotonic() >= deadline:
                    timed_out = True
                    log.warning("%s timed out after %.0f s; ending its group", argv[0], timeout_s)
                    break
                if stop is not None and stop.is_set():
                    break
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=0.1)
        finally:
            # Always end the group: also children the leader left behind after a normal exit.
            terminate_group(pgid, grace_s)
            registry.discard(pgid)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:  # pragma: no cover - SIGKILL ignored
                log.error("process %d did not exit after SIGKILL", proc.pid)
            pump.join(timeout=5)
            if proc.stdout is not None:
                proc.stdout.close()
        end = time.monotonic()
        exit_code = None if (timed_out or proc.returncode is None) else proc.returncode
        if stop is not None and stop.is_set() and exit_code is not None and exit_code < 0:
            exit_code = None
        return CommandResult(list(argv), exit_code, end - start, timed_out, start_unix, time.time())

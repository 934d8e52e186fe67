"""A watchdog that ends an experiment's processes when the Ray worker running it dies.

The process-group runner ends every group it started on every way out of the Python code:
timeouts, Ctrl-C, ``ray.cancel``, exceptions. A worker that is SIGKILLed (``ray.cancel(force=True)``,
the out-of-memory killer, a crash) runs no Python code any more, and Ray kills only the direct
children of a worker that exits cleanly, never its grandchildren; the training processes, which
lead their own groups, would be left behind. So the Ray task starts this watchdog first:

- it is detached (double fork, own session), so neither the worker's death nor Ray's clean-up of
  the worker's direct children ends it;
- the task tells it, through a pipe on its stdin, every process group it starts and ends
  (:class:`GroupReaper` is a :class:`~codedag.energy.process.ProcessRegistry` that does so), at
  once when the group starts, so a worker killed right after starting its training leaves no
  group the watchdog has not heard of;
- it also notes every descendant of the worker a few times per second (the CPU energy ``perf``
  process, anything a library starts);
- when the pipe closes it exits. A task that leaves its work normally writes ``done`` first; a
  pipe closed without it means the worker died (its file descriptors close before it turns into
  a zombie, so its state is no proof of life at that moment), and the watchdog first ends every
  group and process it knew of: SIGTERM, then SIGKILL after the grace period.

``python -m codedag.energy.ray_reaper WORKER_PID GRACE_S`` runs it; it needs only psutil.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from typing import IO

import psutil

from codedag.energy.process import TERM_GRACE_S, ProcessRegistry, ProcessTree

POLL_S = 0.2
DONE = "done"  # the task left its work normally; written last, before closing the pipe


class GroupReaper(ProcessRegistry):
    """A process registry whose groups are also ended by a watchdog if this process dies.

    Use it as a context manager around the work; pass it as ``registry`` to ``run_command`` and
    ``BackgroundLoad``.

    Args:
        grace_s: seconds between SIGTERM and SIGKILL when the watchdog ends what is left.
    """

    def __init__(self, grace_s: float = TERM_GRACE_S) -> None:
        super().__init__()
        self.grace_s = grace_s
        self._pipe: IO[str] | None = None

    def __enter__(self) -> GroupReaper:
        launcher = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "codedag.energy.ray_reaper",
                str(os.getpid()),
                str(self.grace_s),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            text=True,
        )
        launcher.wait()  # the launcher forks the watchdog and exits at once
        self._pipe = launcher.stdin
        return self

    def __exit__(self, *exc: object) -> None:
        self.terminate_all(self.grace_s)
        self._send(DONE)
        pipe, self._pipe = self._pipe, None
        if pipe is not None:
            with contextlib.suppress(OSError):
                pipe.close()

    def _send(self, line: str) -> None:
        if self._pipe is None:
            return
        try:
            self._pipe.write(line + "\n")
            self._pipe.flush()
        except OSError:  # the watchdog is gone; the groups are still ended by this process
            self._pipe = None

    def add(self, run: ProcessTree | int) -> None:
        super().add(run)
        self._send(f"+{_leader(run)}")

    def discard(self, run: ProcessTree | int) -> None:
        super().discard(run)
        self._send(f"-{_leader(run)}")


def _leader(run: ProcessTree | int) -> int:
    """The process group of a run: its leader's pid (the leader of its own group)."""
    return run.leader if isinstance(run, ProcessTree) else int(run)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() not in (psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD)
    except psutil.NoSuchProcess:
        return False


def _pgid(pid: int) -> int | None:
    try:
        return os.getpgid(pid)
    except OSError:
        return None


class _Watch:
    """What the watchdog knows: registered groups and the descendants it has seen."""

    def __init__(self, worker: int) -> None:
        self.worker = worker
        self.groups: set[int] = set()
        self.seen: dict[int, tuple[float, int | None]] = {}  # pid -> (create time, pgid)
        self.protected = {_pgid(worker), os.getpgid(0)}
        self.done = False  # the task said it left its work normally

    def note(self, line: str) -> None:
        line = line.strip()
        if line == DONE:
            self.done = True
        elif line[:1] in "+-" and line[1:].isdigit():
            pgid = int(line[1:])
            if line[0] == "+":
                self.groups.add(pgid)
            else:
                self.groups.discard(pgid)

    def poll(self) -> None:
        try:
            children = psutil.Process(self.worker).children(recursive=True)
        except psutil.Error:
            return
        for child in children:
            if child.pid != os.getpid() and child.pid not in self.seen:
                with contextlib.suppress(psutil.Error):
                    self.seen[child.pid] = (child.create_time(), _pgid(child.pid))

    def end_all(self, grace_s: float) -> None:
        """SIGTERM, then SIGKILL, to every known group and every seen process still alive."""
        leaders = {pgid for pid, (_, pgid) in self.seen.items() if pgid == pid}
        groups = (self.groups | leaders) - self.protected
        singles = []
        for pid, (created, pgid) in self.seen.items():
            if pgid in groups:
                continue
            with contextlib.suppress(psutil.Error):
                proc = psutil.Process(pid)
                if proc.create_time() == created:  # not a reused pid
                    singles.append(proc)
        for sig, wait_s in ((signal.SIGTERM, grace_s), (signal.SIGKILL, 2.0)):
            for pgid in groups:
                with contextlib.suppress(OSError):
                    os.killpg(pgid, sig)
            for proc in singles:
                with contextlib.suppress(psutil.Error):
                    proc.send_signal(sig)
            deadline = time.monotonic() + wait_s
            while time.monotonic() < deadline:
                if not self._left(groups, singles):
                    return
                time.sleep(0.05)

    @staticmethod
    def _left(groups: set[int], singles: list[psutil.Process]) -> bool:
        if any(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in singles):
            return True
        for proc in psutil.process_iter(["status"]):
            if proc.info["status"] != psutil.STATUS_ZOMBIE and _pgid(proc.pid) in groups:
                return True
        return False


def watch(worker: int, grace_s: float, stream: IO[str]) -> None:
    """Follow ``stream`` until it closes; then, unless the task said ``done``, end what it left.

    A worker found dead before the stream closes also ends the watch.
    """
    state = _Watch(worker)
    fd = stream.fileno()
    buffer = b""
    while True:
        ready, _, _ = select.select([fd], [], [], POLL_S)
        if ready:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            buffer += chunk
            *lines, rest = buffer.split(b"\n")
            buffer = rest
            for line in lines:
                state.note(line.decode(errors="replace"))
        state.poll()
        if not _alive(worker):
            # what the task wrote before it died is still in the pipe: read it all
            while select.select([fd], [], [], 0)[0] and (chunk := os.read(fd, 4096)):
                buffer += chunk
            for line in buffer.split(b"\n"):
                state.note(line.decode(errors="replace"))
            break
    if not state.done or not _alive(worker):
        state.end_all(grace_s)
    elif state.groups:
        # The task left its work normally and ended its groups itself; end only registered
        # leftovers, never what the worker runs for others.
        state.seen.clear()
        state.end_all(grace_s)


def main(argv: list[str]) -> int:
    """Entry point: detach (double fork), then watch the worker."""
    worker, grace_s = int(argv[0]), float(argv[1])
    if os.fork() > 0:
        os._exit(0)  # the launcher: its parent (the worker) reaps it right away
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(worker, grace_s, sys.stdin)
    return 0


if __name__ == "__main__":  # pragma: no cover - runs as its own process
    sys.exit(main(sys.argv[1:]))

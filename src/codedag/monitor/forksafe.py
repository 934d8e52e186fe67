"""An ExperimentMonitor in a forked process (a DataLoader worker) writes nothing there.

A DataLoader with workers forks the training process, and with it every monitor: calls made in
``Dataset.__getitem__`` would otherwise append the workers' rows to the parent's CSV streams (a
copy of each open file, with the parent's unflushed buffer in it) and rewrite its results file.
Monitors therefore belong to the process that created them: in any other process every call is
ignored (one warning per process), and right after a fork the child's copies of the CSV streams are
pointed at ``/dev/null`` so that even the interpreter's final flush of the inherited buffers writes
nothing. Record per-batch figures in the main process, from the batches the loader yields.
"""

from __future__ import annotations

import logging
import os
import weakref
from typing import Any

from codedag.util import forks

log = logging.getLogger(__name__)

_monitors: weakref.WeakSet[Any] = weakref.WeakSet()
_hook_installed = False
_warned_pid: int | None = None
# This process's id, kept current by the at-fork hook once a monitor is registered: the per-step
# check compares it with the monitor's own (``forksafe.pid != owner``) instead of asking the
# kernel (a system call costs microseconds right after a training step's wait), and calls
# :func:`ignored_here` only when they differ.
pid = os.getpid()


def register(monitor: object) -> None:
    """Follow ``monitor`` across forks (installs the at-fork hook once per process)."""
    global _hook_installed, pid
    _monitors.add(monitor)
    if not _hook_installed:
        pid = os.getpid()  # this module may have been imported before a fork
        forks.on_fork(after_in_child=_after_fork_in_child)
        _hook_installed = True


def _after_fork_in_child() -> None:
    global pid
    pid = os.getpid()
    for monitor in list(_monitors):
        for fh in monitor.open_stream_files():
            _silence(fh)


def _silence(fh: Any) -> None:
    """Point a file object's descriptor at /dev/null, in this process only."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, fh.fileno())
        finally:
            os.close(devnull)
    except (OSError, ValueError):  # closed meanwhile: nothing left to protect
        pass


def ignored_here(owner_pid: int, what: str) -> bool:
    """True (with one warning per process) when called outside the monitor's own process."""
    global _warned_pid
    here = pid if _hook_installed else os.getpid()
    if here == owner_pid:
        return False
    if _warned_pid != here:
        _warned_pid = here
        log.warning(
            "ExperimentMonitor.%s() called in process %d, a fork of %d (e.g. a DataLoader "
            "worker): ignored; monitor calls are recorded only in the process that created the "
            "monitor",
            what,
            here,
            owner_pid,
        )
    return True

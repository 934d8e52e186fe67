"""The LMDB environments open in this process: shared by folder, never closed under a reader.

LMDB allows one environment per process and folder, so the tiers of one folder share it. A read
with ``buffers=True`` hands out views of the environment's memory map: once the environment is
closed the map is gone, and reading such a view ends the process with SIGSEGV. Closing happens
from other threads than reading (the store closed when a migration is restored while the writer
thread reads a value back, a DataLoader forking its workers from the main thread while another
thread reads), so every operation on an environment is counted while it runs (:class:`Use`),
and closing one (:func:`close`, :func:`close_all`) waits until the operations of other threads
on it have ended, holding new ones back meanwhile (they open it again afterwards).

LMDB forbids using an environment across ``fork``. Before a fork every environment is closed
that way, no operation begins until the fork is over, and the child opens its own on first use.
What runs a thread of its own on the environments is told of every fork first
(:func:`on_fork`: the writer finishes its transaction and holds its thread). Python drops an
exception raised in a fork's hooks, so an interruption (Ctrl-C) that lands while they wait is
delivered again once the fork is over (:func:`codedag.util.signals.redeliver_interrupts`).
"""

from __future__ import annotations

import logging
import os
import threading
import weakref
from collections.abc import Callable
from typing import Any, Protocol

from codedag.util import forks, signals

log = logging.getLogger(__name__)

WAIT_S = 30.0
"""How long closing an environment waits for other threads' operations on it; one still in use
after that is left open (unused by a forked child, closed at the next close)."""

Opened = tuple[Any, dict[bytes, Any]]
"""An environment and its named databases."""

_OPEN: dict[str, tuple[Any, dict[bytes, Any], int]] = {}
"""Environments open by folder: the environment, its databases and the process that opened it
(one inherited across ``fork`` is never used)."""
_USERS: dict[str, list[int]] = {}
"""Folder -> the threads inside an operation on its environment (a thread once per operation)."""
_CLOSING: set[str] = set()
"""Folders whose environment is being closed: operations on them wait."""
_lock = threading.RLock()
_idle = threading.Condition(_lock)
_forking: int | None = None  # the thread that forks, from before the fork until after it
_holding = False  # it holds the lock meanwhile
_pid = os.getpid()
"""This process's id, set again in a forked child (``os.getpid`` is a system call)."""
_hook_installed = False


class Use:
    """An operation on the environment of ``key`` (opened by ``opener`` if not open here), as a
    context: entered, it gives the environment and its databases; the environment is not closed
    before the context ends."""

    __slots__ = ("key", "opener")

    def __init__(self, key: str, opener: Callable[[], Opened]) -> None:
        self.key = key
        self.opener = opener

    def __enter__(self) -> Opened:
        key = self.key
        me = threading.get_ident()
        with _lock:
            users = _USERS.get(key)
            if users is None or me not in users:  # a thread's nested operation never waits
                while (_forking is not None and _forking != me) or key in _CLOSING:
                    _idle.wait()
            found = _OPEN.get(key)
            if found is None or found[2] != _pid:
                env, dbs = self.opener()
                _OPEN[key] = found = (env, dbs, _pid)
            _USERS.setdefault(key, []).append(me)
            return found[0], found[1]

    def __exit__(self, *_exc: object) -> None:
        with _lock:
            users = _USERS.get(self.key)
            if users is not None:  # None: forked meanwhile (the child starts afresh)
                users.remove(threading.get_ident())
                if not users:
                    del _USERS[self.key]
                    if _CLOSING:  # only a closing waits for the users to leave
                        _idle.notify_all()


def opened_here(key: str) -> bool:
    """Whether this process opened the environment of ``key`` and has not closed it."""
    found = _OPEN.get(key)
    return found is not None and found[2] == _pid


def close(key: str, wait_s: float = WAIT_S) -> bool:
    """Close the environment of ``key`` in this process once no other thread uses it (it opens
    again on the next use); False when one still did after ``wait_s`` (it stays open)."""
    me = threading.get_ident()
    with _lock:
        found = _OPEN.get(key)
        if found is None:
            return True
        if found[2] != _pid:  # inherited across fork: never used here, never closed here
            del _OPEN[key]
            return True
        _CLOSING.add(key)
        try:
            idle = _idle.wait_for(lambda: all(t == me for t in _USERS.get(key, ())), wait_s)
            if not idle:
                log.warning(
                    "prefix cache: the store at %s is still read after %.0f s; it stays open",
                    key,
                    wait_s,
                )
                return False
            del _OPEN[key]
            found[0].close()
            return True
        finally:
            _CLOSING.discard(key)
            _idle.notify_all()


def close_all() -> None:
    """Close every environment this process opened, as :func:`close` does (before a fork; they
    open again on use)."""
    with _lock:
        for key in list(_OPEN):
            close(key)


class ForkAware(Protocol):
    """What uses the environments from a thread of its own and must be quiet across a fork."""

    def before_fork(self) -> None:
        """Finish what the thread is writing and hold it (the environments close next)."""

    def after_fork_in_parent(self) -> None:
        """Let the thread go on."""

    def after_fork_in_child(self) -> None:
        """Start afresh: the thread does not exist in the child."""


_FORK_AWARE: weakref.WeakSet[Any] = weakref.WeakSet()


def on_fork(user: ForkAware) -> None:
    """Have ``user`` told of every fork, around closing the environments."""
    install_fork_hook()
    _FORK_AWARE.add(user)


def _before_fork() -> None:
    global _forking, _holding
    signals.redeliver_interrupts(True)  # an interruption raised in a fork hook would be dropped
    try:
        for user in list(_FORK_AWARE):
            user.before_fork()
    finally:
        _lock.acquire()  # held until the fork is over: no operation begins meanwhile
        _holding, _forking = True, threading.get_ident()
        close_all()


def _after_fork_in_parent() -> None:
    global _forking, _holding
    if _holding:
        _holding, _forking = False, None
        _idle.notify_all()
        _lock.release()
    try:
        for user in list(_FORK_AWARE):
            user.after_fork_in_parent()
    finally:
        signals.redeliver_interrupts(False)


def _after_fork_in_child() -> None:
    global _lock, _idle, _forking, _holding, _pid
    _pid = os.getpid()
    _lock = threading.RLock()  # the parent's threads, and their operations, are not here
    _idle = threading.Condition(_lock)
    _USERS.clear()
    _CLOSING.clear()
    _holding, _forking = False, None
    signals.redeliver_interrupts(False)
    for user in list(_FORK_AWARE):
        user.after_fork_in_child()


def install_fork_hook() -> None:
    """Close the environments before every fork of this process (once installed)."""
    global _hook_installed
    with _lock:
        if not _hook_installed and hasattr(os, "register_at_fork"):
            os.register_at_fork(
                before=_before_fork,
                after_in_parent=_after_fork_in_parent,
                after_in_child=_after_fork_in_child,
            )
            _hook_installed = True


def _refresh_pid() -> None:
    global _pid
    _pid = os.getpid()


forks.on_fork(after_in_child=_refresh_pid)

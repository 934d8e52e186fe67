"""Fork hooks run in a declared order: what a forked child resets comes before what reads it.

``os.register_at_fork`` runs a child's hooks in the order they were registered, which for
codedag's modules is the order they happened to be first used in the process. A hook that reads
state another hook resets (a worker's counters read its guard, whose lock another thread of the
parent may have held while it forked) must run after that reset, whatever was used first. So
such hooks are registered here with their stage, and one process-wide hook runs them: every
:data:`RESET` hook of the child, then every :data:`REPORT` hook; ``before`` hooks run in the
parent before the fork, in the order registered, ``after_in_parent`` ones after it.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

RESET = 0
"""Stage of a child hook that makes state the parent left behind usable (locks, threads, pids)."""
REPORT = 1
"""Stage of a child hook that reads state the :data:`RESET` hooks made usable."""

Hook = Callable[[], None]

_before: list[Hook] = []
_after_in_parent: list[Hook] = []
_after_in_child: list[tuple[int, Hook]] = []
_lock = threading.Lock()
_registered = False


def on_fork(
    *,
    before: Hook | None = None,
    after_in_parent: Hook | None = None,
    after_in_child: Hook | None = None,
    stage: int = RESET,
) -> None:
    """Run these hooks at every later fork of this process (each function once, however often
    it is given).

    Args:
        before: in the parent, before the fork.
        after_in_parent: in the parent, after the fork.
        after_in_child: in the child, at its ``stage`` (:data:`RESET` or :data:`REPORT`).
        stage: when ``after_in_child`` runs among the child's hooks.
    """
    global _registered
    with _lock:
        if before is not None and before not in _before:
            _before.append(before)
        if after_in_parent is not None and after_in_parent not in _after_in_parent:
            _after_in_parent.append(after_in_parent)
        if after_in_child is not None and all(h != after_in_child for _s, h in _after_in_child):
            _after_in_child.append((stage, after_in_child))
            _after_in_child.sort(key=lambda item: item[0])  # stable: registration order within
        if not _registered and hasattr(os, "register_at_fork"):  # no fork on Windows
            os.register_at_fork(
                before=_run_before, after_in_parent=_run_after_in_parent, after_in_child=_run_child
            )
            _registered = True


def _run(hooks: list[Hook]) -> None:
    for hook in hooks:
        try:
            hook()
        except Exception:  # one hook failing never keeps the others from running
            log.debug("fork hook %r failed", hook, exc_info=True)


def _run_before() -> None:
    _run(list(_before))


def _run_after_in_parent() -> None:
    _run(list(_after_in_parent))


def _run_child() -> None:
    global _lock
    _lock = threading.Lock()  # the parent's other threads may have held it
    _run([hook for _stage, hook in _after_in_child])

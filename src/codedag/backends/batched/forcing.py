"""Counting forced values, by reason and call site; sites that keep forcing stop deferring.

A deferred value is *forced* when code asks for something only the data can answer (``bool(x)``,
``float(x.mean())``, iteration, a write, a function the recorder does not know): its recorded
calls replay through the original CPU functions in that process, and it goes on as a plain array.
Every forcing is counted here under one of :data:`REASONS` and the user code line that forced it.

A chain's entry site (the call that starts deferring, e.g. ``cv2.resize`` in ``__getitem__``) whose
values are forced :data:`GIVE_UP_AFTER` times in a row stops deferring in this process: from then
on it runs eagerly, as without batched execution, and the log says so once.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections import Counter

from codedag.util import forks

log = logging.getLogger(__name__)

REASONS: tuple[str, ...] = (
    "conversion",  # __array__, the buffer protocol, an array interface
    "truth_value",  # bool(x), if x: ...
    "number",  # float(x), int(x), x.item(), x.tolist(), an index
    "iteration",  # for row in x, len-based unpacking
    "repr",  # repr/str/format
    "write",  # x[...] = v, an in-place operator on a view
    "data_dependent",  # x[mask], x[indices]: the result's shape depends on the data
    "unsupported",  # a function, method or argument the recorder does not know
    "collate",  # a custom collate_fn, or samples default_collate cannot stack
    "error",  # the sample's code failed with deferred values: it ran again eagerly
    "outside",  # a deferred value used outside a DataLoader fetch
    "backend",  # the batched backend failed in the main process: the CPU replay ran
    "verify",  # the batch differed from the CPU reference: the reference was delivered
)

GIVE_UP_AFTER = 8
"""Values forced in a row at one entry site, after which that site runs eagerly."""

_MAX_SITES = 64
_HERE = os.path.dirname(os.path.abspath(__file__))


class ForceLog:
    """Forcings of this process, by reason and site, and the entry sites that stopped."""

    def __init__(self, give_up_after: int = GIVE_UP_AFTER) -> None:
        self.give_up_after = give_up_after
        self.reasons: Counter[str] = Counter()
        self.sites: Counter[str] = Counter()
        self.stopped: set[str] = set()
        self._streak: Counter[str] = Counter()
        self._taken: Counter[str] = Counter()
        self._lock = threading.Lock()

    def forced(
        self,
        reason: str,
        detail: str,
        entry: str | None,
        count: int = 1,
        where: str | None = None,
    ) -> None:
        """Count ``count`` forced values of ``reason`` at ``where`` (default: the user code line
        calling us), and against ``entry``'s streak."""
        where = where or user_line()
        site = f"{where} ({detail})" if detail else where
        with self._lock:
            self.reasons[reason] += count
            if site in self.sites or len(self.sites) < _MAX_SITES:
                self.sites[site] += count
            else:
                self.sites["(other sites)"] += count
            if entry is None or entry in self.stopped:
                return
            self._streak[entry] += count
            if self._streak[entry] < self.give_up_after:
                return
            self.stopped.add(entry)
        log.info(
            "batched execution: values deferred at %s were forced %d times in a row (last: %s, "
            "%s); that site runs eagerly from now on in process %d",
            entry,
            self.give_up_after,
            reason,
            site,
            os.getpid(),
        )

    def delivered(self, entry: str | None) -> None:
        """A value of ``entry`` reached collate deferred: its streak of forcings ends."""
        if entry is not None and self._streak.get(entry):
            with self._lock:
                self._streak.pop(entry, None)

    def is_stopped(self, entry: str) -> bool:
        """Whether ``entry`` stopped deferring in this process."""
        return entry in self.stopped

    def take_sites(self) -> dict[str, int]:
        """Forcings per site since the previous call (what a record carries to the main process)."""
        with self._lock:
            delta = {k: v - self._taken.get(k, 0) for k, v in self.sites.items()}
            self._taken = Counter(self.sites)
        return {k: v for k, v in delta.items() if v > 0}

    def counts(self) -> dict[str, int]:
        """``{"forced_<reason>": count}`` for every reason (what workers publish)."""
        return {f"forced_{r}": self.reasons.get(r, 0) for r in REASONS}

    def reset(self) -> None:
        """Forget everything (a new migrator)."""
        with self._lock:
            self.reasons.clear()
            self.sites.clear()
            self.stopped.clear()
            self._streak.clear()
            self._taken.clear()

    def after_fork(self) -> None:
        """A forked child: the lock may have been held by another thread of the parent."""
        self._lock = threading.Lock()


def user_line() -> str:
    """``file:line`` of the innermost frame outside this package (the code that forced)."""
    frame = sys._getframe(1)
    while frame is not None and os.path.dirname(os.path.abspath(frame.f_code.co_filename)) == _HERE:
        frame = frame.f_back  # type: ignore[assignment]
    if frame is None:
        return "?"
    return f"{short_path(frame.f_code.co_filename)}:{frame.f_lineno}"


def error_line(error: BaseException) -> str:
    """``file:line`` of the innermost frame of ``error``'s traceback outside this package."""
    found = "?"
    tb = error.__traceback__
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if os.path.dirname(os.path.abspath(filename)) != _HERE:
            found = f"{short_path(filename)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return found


def code_line(function: object) -> str:
    """``file:line`` where ``function`` is defined (its name when it has no code)."""
    code = getattr(function, "__code__", None)
    if code is None:
        return getattr(function, "__qualname__", type(function).__qualname__)
    return f"{short_path(code.co_filename)}:{code.co_firstlineno}"


def short_path(filename: str) -> str:
    """A file name relative to the working directory, or its base name when outside it."""
    with contextlib.suppress(ValueError):  # another drive (Windows)
        filename = os.path.relpath(filename)
    return os.path.basename(filename) if filename.startswith("..") else filename


FORCED = ForceLog()
"""This process's forcings."""


def install_fork_hook() -> None:
    """Give forked children a fresh lock (once per process; never at import)."""
    forks.on_fork(after_in_child=FORCED.after_fork)

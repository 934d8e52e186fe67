"""Counters of migrated calls made in forked DataLoader workers, summed into the main process.

Most real pipelines run ``__getitem__`` in worker processes, so without this the main process's
``get_stats()`` would report nothing migrated. A fork inherits the patched functions and their
counters; at the fork each child remembers the counters' values (its baseline), and when it exits
normally (``multiprocessing`` runs its finalizers; a DataLoader worker ends that way when its
iterator is exhausted or deleted) it adds what it counted since then into a shared array that the
parent created before forking. Workers that are killed lose their counts; spawned workers do not
run the patches at all (see docs/migration.md).
"""

from __future__ import annotations

import logging
import multiprocessing
import multiprocessing.util
import os
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)

FIELDS = ("migrated", "fell_back", "passed_through", "nested")


class WorkerStats:
    """Shared sums of the counters of forked children, per function.

    Args:
        names: function names, in a fixed order.
        read: ``name -> {field: count}`` of this process's counters.
    """

    def __init__(self, names: list[str], read: Callable[[str], dict[str, int]]) -> None:
        self.names = list(names)
        self.read = read
        self.parent_pid = os.getpid()
        try:
            self._shared: Any = multiprocessing.Array("q", max(1, len(self.names) * len(FIELDS)))
        except OSError as e:  # no shared memory (a container without /dev/shm, a sandbox)
            log.debug("worker counters disabled: %s", e)
            self._shared = None
        self._baseline: dict[str, dict[str, int]] | None = None
        # Runs in children that multiprocessing starts (after it resets their finalizers).
        multiprocessing.util.register_after_fork(self, WorkerStats._after_fork_in_child)

    def _after_fork_in_child(self) -> None:
        self._baseline = {name: dict(self.read(name)) for name in self.names}
        multiprocessing.util.Finalize(self, WorkerStats.flush, args=(self,), exitpriority=10)

    def flush(self) -> None:
        """Add this child's counts since the fork into the shared sums (once)."""
        baseline, self._baseline = self._baseline, None
        if baseline is None or self._shared is None:
            return
        with self._shared.get_lock():
            for i, name in enumerate(self.names):
                now = self.read(name)
                for j, field in enumerate(FIELDS):
                    self._shared[i * len(FIELDS) + j] += now[field] - baseline[name][field]

    def totals(self, name: str) -> dict[str, int]:
        """What forked children counted for ``name`` (zeros for a function not listed)."""
        if name not in self.names or self._shared is None:
            return dict.fromkeys(FIELDS, 0)
        i = self.names.index(name)
        with self._shared.get_lock():
            return {f: int(self._shared[i * len(FIELDS) + j]) for j, f in enumerate(FIELDS)}

"""What the run-time parts of a plan that patch functions of their own share: undoing it.

The batched chains and the lookup tables each own a :class:`codedag.patching.Patcher` and count
what forked DataLoader workers do through :class:`codedag.migrate.workerstats.WorkerStats`.
"""

from __future__ import annotations

from typing import Any

from codedag.patching import Patcher


class PatchedRuntime:
    """A run-time part of a plan with patches of its own.

    Args:
        name: the patcher's name (in errors about a function patched twice).
    """

    def __init__(self, name: str) -> None:
        self.patcher = Patcher(name)
        self.workers: Any = None  # WorkerStats once applied
        self._applied = False

    def restore(self) -> int:
        """Remove the patches and stop counting forked workers; returns how many were
        removed."""
        if not self._applied:
            return 0
        count = self.patcher.restore()
        if self.workers is not None:
            self.workers.stop_tracking()
        self._applied = False
        return count

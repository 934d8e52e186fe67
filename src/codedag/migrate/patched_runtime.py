"""What the run-time parts of a plan share: being applied through a :class:`~.dispatch.Dispatch`.

The prefix cache, the lookup tables and the batched chains are each a :class:`PatchedRuntime`:
they give layers (:class:`codedag.migrate.dispatch.RuntimePart`) and count what forked
DataLoader workers do through :class:`codedag.migrate.workerstats.WorkerStats`. A
:class:`~codedag.migrate.PipelineMigrator` applies all of a plan's parts through one dispatch;
:meth:`PatchedRuntime.apply` applies one part alone (tests, benchmarks).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from codedag.migrate.dispatch import Dispatch


class PatchedRuntime:
    """A run-time part of a plan with layers of its own.

    Subclasses set :attr:`section` and implement ``active``, ``functions``, ``hooks`` and
    ``layer``; they may extend the life-cycle methods.
    """

    section = ""

    def __init__(self) -> None:
        self.workers: Any = None  # WorkerStats once applied
        self.failed: dict[str, str] = {}
        self._dispatch: Dispatch | None = None
        self._applied = False

    # -- the parts of RuntimePart a subclass does not need to change ---------------------------
    @property
    def active(self) -> bool:
        """Whether the plan gives this part anything to do."""
        raise NotImplementedError

    def functions(self) -> list[str]:
        """Library functions this part replaces."""
        raise NotImplementedError

    def hooks(self) -> list[str]:
        """DataLoader hooks this part replaces."""
        raise NotImplementedError

    def layer(self, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        """This part's replacement of ``name``, calling ``original``."""
        raise NotImplementedError

    def before_patching(self) -> None:
        """Nothing to prepare by default."""

    def after_patching(self, failed: Mapping[str, str]) -> None:
        """Mark applied and start counting the workers."""
        self.failed = dict(failed)
        self.workers = self.worker_stats()
        self._applied = True

    def after_restore(self) -> None:
        """Stop counting the workers."""
        if self.workers is not None:
            self.workers.stop_tracking()
        self._applied = False

    def worker_stats(self) -> Any:
        """The :class:`~codedag.migrate.workerstats.WorkerStats` of this part (None: none)."""
        return None

    # -- applied alone ----------------------------------------------------------------------
    def apply(self) -> dict[str, int]:
        """Apply this part alone; returns ``{"patched": n, "failed": m}`` (its functions and
        hooks replaced, and its functions absent here).

        Raises:
            MigrationError: a hook cannot be patched (nothing stays patched).
        """
        if self._applied or not self.active:
            return {"patched": 0, "failed": 0}
        dispatch = Dispatch([self], label=self.section)
        dispatch.apply()
        self._dispatch = dispatch
        return self.counts()

    def counts(self) -> dict[str, int]:
        """How many of its functions and hooks were replaced, and how many could not be."""
        failed = len(self.failed)
        return {"patched": len(self.functions()) + len(self.hooks()) - failed, "failed": failed}

    def restore(self) -> int:
        """Undo :meth:`apply`; returns how many names were put back (0 when applied with other
        parts: their migrator restores them together)."""
        dispatch, self._dispatch = self._dispatch, None
        return dispatch.restore() if dispatch is not None else 0

    def patched_names(self) -> list[str]:
        """Every name replaced by :meth:`apply` (aliases and hooks included)."""
        return self._dispatch.patched_names() if self._dispatch is not None else []

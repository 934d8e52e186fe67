"""The batched part of a plan that runs no chain batched: nothing to patch, nothing to import.

Batched execution's run-time (:mod:`codedag.migrate.batched.runtime`) brings the executor, the
recorder, graph capture and delivery with it: 23 modules a migrator would not import otherwise,
and applying a plan without chains took 127-137 ms with them against 58-97 ms without on this
machine (a fresh process, libraries imported). A plan without a batched chain (most plans on the
CPU) gets this part instead, which says it is inactive and answers the calls a migrator makes of
its batched part.
"""

from __future__ import annotations

from codedag.migrate.batched.settings import ChainSet
from codedag.migrate.patched_runtime import PatchedRuntime


class NoBatchedChains(PatchedRuntime):
    """The batched part of a plan without batched chains (see the module docstring)."""

    section = "batched"

    def __init__(self, chains: ChainSet) -> None:
        super().__init__()
        self.chains = chains

    @property
    def active(self) -> bool:
        """Never: no chain runs batched."""
        return False

    def functions(self) -> list[str]:
        """None."""
        return []

    def hooks(self) -> list[str]:
        """None."""
        return []

    def stop(self, reason: str) -> None:
        """Nothing runs batched: nothing to stop."""

    def run_per_sample(self) -> None:
        """Every sample runs per sample already."""

"""The prefix cache's chains and the lookup tables' runs, kept to the functions the registry admits.

A plan's ``cache`` and ``tables`` sections name library functions the runtimes patch where they
run (a cached chain's source and steps, a run's producer, the guards of both). Patching a name
imports its module, so each runtime keeps, before anything is imported, only what
:func:`codedag.backends.admission.admit_in_place` admits: a chain or a run naming another function
is left out, a guard naming one is dropped, with one warning per section.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol, TypeVar

from codedag.backends.admission import admit_in_place, in_place_line
from codedag.util.text import listing, printable

if TYPE_CHECKING:
    from codedag.migrate.cache.session import ChainSpec

log = logging.getLogger(__name__)


class _Run(Protocol):
    @property
    def producer(self) -> str:
        """The function whose calls start the run."""


Run = TypeVar("Run", bound=_Run)


def admitted_chains(chains: list[ChainSpec]) -> list[ChainSpec]:
    """The cached chains whose source and functions are admitted, without unadmitted guards."""
    if not chains:
        return chains
    named = [
        (f"cache chain {c.id}", name)
        for c in chains
        for name in (c.source_function, *c.functions, *c.guards)
    ]
    admission = admit_in_place(named)
    line = in_place_line(admission, (name for _where, name in named), "prefix cache")
    if line is None:
        return chains
    allows = admission.allows_in_place
    kept = [
        dataclasses.replace(c, guards=tuple(g for g in c.guards if allows(g)))
        for c in chains
        if all(allows(f) for f in (c.source_function, *c.functions))
    ]
    ids = {c.id for c in kept}
    dropped = [printable(c.id, 40) for c in chains if c.id not in ids]
    if dropped:
        line += f"; chain(s) not cached: {listing(dropped, 5)}"
    log.warning("%s", line)
    return kept


def admitted_runs(runs: Sequence[Run], guards: Sequence[str]) -> tuple[list[Run], list[str]]:
    """The lookup-table runs whose producer is admitted, and the admitted guards."""
    named = [("tables.runs", r.producer) for r in runs] + [("tables.guards", g) for g in guards]
    if not named:
        return list(runs), list(guards)
    admission = admit_in_place(named)
    line = in_place_line(admission, (name for _where, name in named), "lookup tables")
    if line is not None:
        log.warning("%s", line)
    allows = admission.allows_in_place
    return [r for r in runs if allows(r.producer)], [g for g in guards if allows(g)]

"""Which calls a plan must not place unless the user opts in by name, read from the ops'
declarations: random draws (a backend draws from another stream and the data changes) and
backends declared to differ from their library beyond the tolerance table.
"""

from __future__ import annotations

from codedag.backends.contract import Fidelity
from codedag.backends.libraries import random_prefixes
from codedag.backends.registry import Registry, default_registry

RANDOM_DRAW = "draws random numbers: a backend draws from another stream and the data changes"
"""Why a random draw is not placed (the optimizer) or not moved (the migrator) unless opted in."""


def draws_random_numbers(name: str, registry: Registry | None = None) -> bool:
    """Whether ``name`` is a random draw: its spec says so (``random``), or it has no spec and
    its name starts with one of :data:`~codedag.backends.registry.RANDOM_PREFIXES` (``numpy.random.Generator.normal``)."""
    spec = (registry if registry is not None else default_registry()).get(name)
    if spec is None:
        return name.startswith(random_prefixes())
    return spec.quirks.random


def placement_blocker(name: str) -> str | None:
    """Why a plan must not place ``name`` unless the user opts in by name, or ``None``.

    Read from the op's declaration: functions whose result is not a function of their arguments
    (``random``), and backends declared to differ from the library beyond the tolerance table
    (``Fidelity.DIFFERS``). Names without a spec: random draws by prefix.
    """
    if draws_random_numbers(name):
        return RANDOM_DRAW
    spec = default_registry().get(name)
    if spec is None:
        return None
    if spec.quirks.fidelity is Fidelity.DIFFERS:
        return spec.quirks.differs or "its backend is declared to differ from the library"
    return None

"""Function names from files, admitted by the registry before anything is imported.

A plan or a DAG may come from another machine or another person, and patching, warming or timing
a function imports its module: a file naming ``mymodule.f`` would make codedag import (and run)
any module on ``sys.path``. So every name a file would have codedag use is looked up here first,
as a string: a name is *admitted* when the registry has a backend for it; a name on the list of
functions that must stay on the CPU (I/O, decoders, ``os.system``) is *refused*; anything else
is *unknown* and left alone. Only the libraries the registry knows are ever imported for a file.

:func:`admit_plan` covers every section of a migration plan (the fields the plan model types as
function names or context keys, :mod:`codedag.plan.names`) and :func:`admit_dag` the calls of a
traced DAG. The migrator, calibration and the CLI all go through them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from codedag.backends.registry import Registry, default_registry
from codedag.errors import MigrationError
from codedag.plan import MigrationPlan
from codedag.plan.names import named_functions
from codedag.util.text import listing, printable

UNKNOWN = "not in the registry of migratable functions"


@dataclass
class Admission:
    """What a file may make codedag use.

    Attributes:
        admitted: names with a backend in the registry (as written in the file).
        refused: names that must stay on the CPU -> why.
        unknown: names the registry does not know -> the first place each appears.
    """

    admitted: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)

    def allows(self, name: str) -> bool:
        """Whether ``name`` may be used (patched, imported, timed)."""
        return name in self.admitted

    def check(self, what: str = "the plan") -> None:
        """Raise when the file names a function that must stay on the CPU.

        Raises:
            MigrationError: listing the refused names and why.
        """
        if self.refused:
            names = [f"{printable(n, 80)} ({why})" for n, why in sorted(self.refused.items())]
            raise MigrationError(
                f"{what} migrates functions that must stay on the CPU: {listing(names)}; "
                "expected only names from list_supported_functions()"
            )

    def unknown_line(self, what: str = "the plan") -> str | None:
        """One line naming the unknown names (the first few, then a count), or ``None``."""
        if not self.unknown:
            return None
        names = [printable(n, 80) for n in sorted(self.unknown)]
        count = len(names)
        return f"{what} names {count} function(s) {UNKNOWN}; they stay unpatched: {listing(names)}"


def admit(names: Iterable[tuple[str, str]], registry: Registry | None = None) -> Admission:
    """Look each ``(where, name)`` up in the registry, by string, importing nothing else.

    Args:
        names: the names a file would have used, each with where it appears.
        registry: the registry (default: the process-wide one).
    """
    registry = registry if registry is not None else default_registry()
    result = Admission()
    for where, name in names:
        if name in result.admitted or name in result.refused or name in result.unknown:
            continue
        reason = registry.non_migratable.get(name)
        if reason is not None:
            result.refused[name] = reason
        elif registry.get(name) is not None:
            result.admitted.add(name)
        else:
            result.unknown[name] = where
    return result


def admit_plan(plan: MigrationPlan, registry: Registry | None = None) -> Admission:
    """Admit every function a plan would have patched, in every section (see the module doc)."""
    return admit(((n.where, n.name) for n in named_functions(plan) if n.used), registry)


def admit_dag(dag: Any, registry: Registry | None = None) -> Admission:
    """Admit the functions of a traced DAG's calls (an ExecutionDAG or a coarsened DAG)."""
    source = getattr(dag, "source", dag)
    return admit(((f"node {n.id}", n.name) for n in source.calls()), registry)

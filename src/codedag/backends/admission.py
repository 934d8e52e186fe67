"""Function names from files, admitted by the registry before anything is imported.

A plan or a DAG may come from another machine or another person, and patching, warming or timing
a function imports its module: a file naming ``mymodule.f`` would make codedag import (and run)
any module on ``sys.path``. So every name a file would have codedag use is looked up here first,
as a string: a name is *admitted* when the registry has a backend for it; a name on the list of
functions that must stay on the CPU (I/O, decoders, ``os.system``) is *refused*; anything else
is *unknown* and left alone. Only the libraries the registry knows are ever imported for a file.

A name the runtime patches where it runs and never moves (the prefix cache's and the lookup
tables' functions: :data:`~codedag.plan.names.LibraryFunction`) is admitted *in place* when the
registry has a backend for it or one of the libraries the registry loads owns it (``cv2.imread``,
``numpy.frombuffer``): a cached chain starts at a decoder that stays on the CPU by design. Such a
name that no library owns is refused when it must stay on the CPU (``os.system``) and unknown
otherwise.

:func:`admit_plan` covers every section of a migration plan (the fields the plan model types as
function names, context keys or library functions, :mod:`codedag.plan.names`) and
:func:`admit_dag` the calls of a traced DAG; :func:`admit_in_place` the names a runtime is about
to patch where they run. The migrator, its runtimes, calibration and the CLI all go through them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from codedag.backends.registry import Registry, default_registry
from codedag.errors import MigrationError
from codedag.plan import MigrationPlan
from codedag.plan.names import NamedFunction, named_functions
from codedag.util.text import listing, printable

UNKNOWN = "not in the registry of migratable functions"


@dataclass
class Admission:
    """What a file may make codedag use.

    Attributes:
        admitted: names with a backend in the registry (as written in the file).
        in_place: names that may be patched where they run (library functions, see the
            module doc); a name in ``admitted`` may be too.
        refused: names that must stay on the CPU -> why.
        unknown: names the registry does not know -> the first place each appears.
    """

    admitted: set[str] = field(default_factory=set)
    in_place: set[str] = field(default_factory=set)
    refused: dict[str, str] = field(default_factory=dict)
    unknown: dict[str, str] = field(default_factory=dict)

    def allows(self, name: str) -> bool:
        """Whether ``name`` may be used (patched, imported, timed)."""
        return name in self.admitted

    def allows_in_place(self, name: str) -> bool:
        """Whether ``name`` may be patched where it runs (imported, never moved)."""
        return name in self.in_place or name in self.admitted

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


def in_place_line(admission: Admission, names: Iterable[str], what: str) -> str | None:
    """One line naming those of ``names`` that ``admission`` does not let ``what`` patch (the
    first few, then a count), or ``None`` when it lets it patch them all."""
    left = sorted({n for n in names if not admission.allows_in_place(n)})
    if not left:
        return None
    shown = [
        printable(n, 80) + (f" ({admission.refused[n]})" if n in admission.refused else "")
        for n in left
    ]
    return (
        f"{what}: {len(left)} function(s) of no library the registry knows stay unpatched: "
        f"{listing(shown)}"
    )


def admit(
    names: Iterable[tuple[str, str]],
    registry: Registry | None = None,
    in_place: Iterable[tuple[str, str]] = (),
) -> Admission:
    """Look each ``(where, name)`` up in the registry, by string, importing nothing else.

    Args:
        names: the names a file would have moved to a device, each with where it appears.
        registry: the registry (default: the process-wide one).
        in_place: the names it would have patched where they run, each with where it appears.
    """
    registry = registry if registry is not None else default_registry()
    result = Admission()
    for where, name in names:
        if name in result.admitted or name in result.refused or name in result.unknown:
            continue
        reason = registry.refusal(name)
        if reason is not None:
            result.refused[name] = reason
        elif registry.get(name) is not None:
            result.admitted.add(name)
        else:
            result.unknown[name] = where
    for where, name in in_place:
        if name in result.in_place or name in result.admitted:
            continue
        refusal = registry.refusal(name)
        if registry.get(name) is not None or _owned(name, registry):
            result.in_place.add(name)
        elif refusal is not None:
            result.refused.setdefault(name, refusal)
        else:
            result.unknown.setdefault(name, where)
    return result


def _owned(name: str, registry: Registry) -> bool:
    """Whether a library the registry loads owns ``name`` (by its top-level module)."""
    return registry.owner(name) is not None


def _admit_named(named: Iterable[NamedFunction], registry: Registry | None) -> Admission:
    used = [n for n in named if n.used]
    return admit(
        ((n.where, n.name) for n in used if n.kind == "function"),
        registry,
        ((n.where, n.name) for n in used if n.kind == "library"),
    )


def admit_plan(plan: MigrationPlan, registry: Registry | None = None) -> Admission:
    """Admit every function a plan would have patched, in every section (see the module doc)."""
    return _admit_named(named_functions(plan), registry)


def admit_in_place(names: Iterable[tuple[str, str]], registry: Registry | None = None) -> Admission:
    """Admit the ``(where, name)`` a runtime is about to patch where they run (the prefix
    cache's and the lookup tables' functions), before anything is imported."""
    return admit((), registry, names)


def admit_dag(dag: Any, registry: Registry | None = None) -> Admission:
    """Admit the functions of a traced DAG's calls (an ExecutionDAG or a coarsened DAG)."""
    source = getattr(dag, "source", dag)
    return admit(((f"node {n.id}", n.name) for n in source.calls()), registry)

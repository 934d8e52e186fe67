"""The migrator's index of a migration plan: placements by function.

The plan is validated by the one plan model (:class:`codedag.plan.MigrationPlan`), which the
optimizer also writes through and ``codedag plan explain`` reads through: a plan is accepted or
refused the same way everywhere.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from codedag.plan import MigrationPlan, read_plan
from codedag.plan.context import Placement, function_of


@dataclass
class PlanView:
    """What the migrator needs from a plan.

    Attributes:
        entries: canonical function name -> ``[(context key, placement)]``; placement is the
            device of a planned call, ``None`` for a traced call the plan keeps on the CPU.
        devices: every device the plan names.
        plan: the validated plan.
    """

    entries: dict[str, list[tuple[str, Placement]]] = field(default_factory=dict)
    devices: set[str] = field(default_factory=set)
    plan: MigrationPlan | None = None

    @property
    def migrated_functions(self) -> list[str]:
        """Functions with at least one planned (migrated) call, sorted."""
        return sorted(n for n, e in self.entries.items() if any(p is not None for _k, p in e))


def parse_plan(plan: Mapping[str, Any] | MigrationPlan, source: str = "migration plan") -> PlanView:
    """Validate a plan and index it by function.

    Calls the plan places are read from ``context_device_map`` (authoritative); traced calls it
    keeps on the CPU are indexed too, so the matcher can tell them from unknown calls.

    Raises:
        SchemaError: listing the problems found.
    """
    model = MigrationPlan.from_dict(dict(plan) if isinstance(plan, Mapping) else plan, source)
    view = PlanView(plan=model)
    seen: set[str] = set()
    for key, device in model.context_device_map.items():
        view.entries.setdefault(function_of(key), []).append((key, device))
        view.devices.add(device)
        seen.add(key)
    for call in model.calls:
        if call.migrate:
            continue  # a placed call absent from context_device_map stays on the CPU
        for key in call.context_keys:
            if key not in seen:
                view.entries.setdefault(function_of(key), []).append((key, None))
                seen.add(key)
    return view


def load_plan_file(path: str | os.PathLike[str]) -> MigrationPlan:
    """Read and validate a plan JSON file (:func:`codedag.plan.read_plan`).

    Raises:
        SchemaError: the file is missing, is not JSON, or is not a valid plan.
    """
    return read_plan(path)

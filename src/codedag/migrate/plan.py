"""Reading a migration plan (CONTRACT.md, written by ``codedag optimize``) for the migrator.

The optimizer owns the plan's model; the migrator reads the JSON form itself so that it depends on
nothing but the format, validates it in one place and reports every problem at once.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codedag.errors import SchemaError
from codedag.migrate.context import Placement, function_of, normalize_key

PLAN_SCHEMA_VERSION = 1


@dataclass
class PlanView:
    """What the migrator needs from a plan.

    Attributes:
        entries: canonical function name -> ``[(context key, placement)]``; placement is the
            device of a planned call, ``None`` for a traced call the plan keeps on the CPU.
        devices: every device the plan names.
        raw: the plan as given.
    """

    entries: dict[str, list[tuple[str, Placement]]] = field(default_factory=dict)
    devices: set[str] = field(default_factory=set)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def migrated_functions(self) -> list[str]:
        """Functions with at least one planned (migrated) call, sorted."""
        return sorted(n for n, e in self.entries.items() if any(p is not None for _k, p in e))


def _device_ok(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    if value == "cpu":
        return True
    kind, _, index = value.partition(":")
    return kind in ("cuda", "mps", "xpu") and (index == "" or index.isdigit())


def parse_plan(plan: Mapping[str, Any]) -> PlanView:
    """Validate a plan dict and index it by function.

    Raises:
        SchemaError: listing every problem found (not only the first).
    """
    problems: list[str] = []
    if not isinstance(plan, Mapping):
        raise SchemaError(f"a migration plan is a JSON object, got {type(plan).__name__}")
    version = plan.get("schema_version", PLAN_SCHEMA_VERSION)
    if not isinstance(version, int) or version > PLAN_SCHEMA_VERSION:
        problems.append(
            f"schema_version {version!r} is not supported (this codedag reads up to "
            f"{PLAN_SCHEMA_VERSION}; upgrade codedag)"
        )
    cdm = plan.get("context_device_map")
    if not isinstance(cdm, Mapping):
        problems.append(
            f"'context_device_map' must be an object of context key -> device, got "
            f"{type(cdm).__name__}"
        )
        cdm = {}
    calls = plan.get("calls", [])
    if not isinstance(calls, list):
        problems.append(f"'calls' must be a list, got {type(calls).__name__}")
        calls = []
    view = PlanView(raw=dict(plan))
    seen: set[str] = set()
    for key, device in cdm.items():
        if not isinstance(key, str) or not key.strip("/"):
            problems.append(f"context key {key!r} is not a non-empty string")
            continue
        if not _device_ok(device):
            problems.append(f"device of {key!r} is {device!r}; expected 'cpu' or 'cuda:<i>'")
            continue
        normalize_key(key)
        view.entries.setdefault(function_of(key), []).append((key, device))
        view.devices.add(device)
        seen.add(key)
    for index, call in enumerate(calls):
        if not isinstance(call, Mapping):
            problems.append(f"calls[{index}] must be an object, got {type(call).__name__}")
            continue
        keys = call.get("context_keys", [])
        if not isinstance(keys, list) or not all(isinstance(k, str) and k for k in keys):
            problems.append(f"calls[{index}].context_keys must be a list of strings")
            continue
        migrate = call.get("migrate", False)
        if not isinstance(migrate, bool):
            problems.append(f"calls[{index}].migrate must be true or false, got {migrate!r}")
            continue
        for key in keys:
            if key in seen:
                continue
            if migrate:
                # Planned calls are authoritative in context_device_map; a migrated call absent
                # from it is kept on the CPU, as the contract says.
                continue
            view.entries.setdefault(function_of(key), []).append((key, None))
            seen.add(key)
    if problems:
        raise SchemaError("malformed migration plan: " + "; ".join(problems))
    return view


def load_plan_file(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a plan JSON file.

    Raises:
        SchemaError: the file is missing or is not JSON.
    """
    target = Path(path)
    try:
        text = target.read_text(encoding="utf-8")
    except OSError as e:
        raise SchemaError(f"cannot read migration plan {str(target)!r}: {e.strerror}") from e
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{str(target)!r} is not JSON: {e.msg} at line {e.lineno}") from e
    if not isinstance(data, dict):
        raise SchemaError(f"{str(target)!r}: expected a JSON object, got {type(data).__name__}")
    return data

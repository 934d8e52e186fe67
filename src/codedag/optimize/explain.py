"""A human view of a migration plan: one row per placed call (``codedag plan explain``)."""

from __future__ import annotations

from typing import Any


def _ms(ns: Any) -> str:
    return f"{(ns or 0) / 1e6:.3f}"


def plan_table(plan: dict[str, Any], limit: int | None = 30) -> Any:
    """A rich Table of the plan's calls, migrated ones first, then by measured time."""
    from rich.table import Table

    calls = sorted(
        plan.get("calls", []), key=lambda c: (not c.get("migrate"), -c.get("measured_ns", 0))
    )
    shown = calls if limit is None else calls[:limit]
    title = (
        f"migration plan: {len(plan.get('context_device_map', {}))} context(s) migrate, "
        f"k={plan.get('k')}, target {plan.get('target_device') or 'none'}"
    )
    table = Table(title=title, expand=False)
    table.add_column("function", overflow="fold", max_width=48)
    table.add_column("n", justify="right")
    table.add_column("device")
    table.add_column("measured ms", justify="right")
    table.add_column("gain ms", justify="right")
    table.add_column("transfer ms", justify="right")
    table.add_column("reason", overflow="fold", max_width=60)
    for call in shown:
        style = "green" if call.get("migrate") else ""
        table.add_row(
            str(call.get("function", "")),
            str(call.get("instance_count", len(call.get("context_keys", [])))),
            str(call.get("device", "cpu")),
            _ms(call.get("measured_ns")),
            _ms(call.get("estimated_gain_ns")),
            _ms(call.get("transfer_cost_ns")),
            str(call.get("reason", "")),
            style=style,
        )
    if len(calls) > len(shown):
        table.caption = f"{len(calls) - len(shown)} more call(s); --all shows every one"
    return table

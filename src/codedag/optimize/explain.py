"""A human view of a migration plan: one row per call, with the measured figures behind it."""

from __future__ import annotations

from typing import Any

from codedag.util.text import terminal_text


def _ms(ns: Any) -> str:
    if ns is None:
        return "-"
    return f"{ns / 1e6:.3g}"


def _speedup(call: dict[str, Any]) -> str:
    original, backend = call.get("original_ns"), call.get("backend_ns")
    if not original or not backend:
        return "-"
    return f"{original / backend:.2f}x"


def plan_table(plan: dict[str, Any], limit: int | None = 30, measured_only: bool = False) -> Any:
    """A rich Table of the plan's calls: placed ones first, then by traced time.

    Args:
        plan: a migration plan dict.
        limit: rows shown at most (``None``: all).
        measured_only: only calls that were measured or placed (the others have nothing to
            show but "no backend").
    """
    from rich.table import Table

    calls = sorted(
        plan.get("calls", []), key=lambda c: (not c.get("migrate"), -c.get("measured_ns", 0))
    )
    if measured_only:
        calls = [c for c in calls if c.get("migrate") or c.get("original_ns") is not None]
    shown = calls if limit is None else calls[:limit]
    placement = plan.get("placement") or {}
    basis = placement.get("basis", "none")
    where = placement.get("device_name") or plan.get("target_device") or "none"
    title = (
        f"migration plan: {len(plan.get('context_device_map', {}))} context(s) migrate, "
        f"target {plan.get('target_device') or 'none'}, decided from "
        + ("measurements on " + where if basis == "measured" else basis)
    )
    table = Table(title=terminal_text(title, None), expand=False)
    table.add_column("function", overflow="fold", max_width=44)
    table.add_column("n", justify="right")
    table.add_column("device")
    table.add_column("library ms/call", justify="right")
    table.add_column("torch ms/call", justify="right")
    table.add_column("speedup", justify="right")
    table.add_column("saving ms", justify="right")
    table.add_column("reason", overflow="fold", max_width=64)
    for call in shown:
        style = "green" if call.get("migrate") else ""
        table.add_row(
            terminal_text(call.get("function", "")),
            str(call.get("instance_count", len(call.get("context_keys", [])))),
            terminal_text(call.get("device", "cpu")),
            _ms(call.get("original_ns")),
            _ms(call.get("backend_ns")),
            _speedup(call),
            _ms(call.get("saving_ns")) if call.get("original_ns") is not None else "-",
            terminal_text(call.get("reason", "")),
            style=style,
        )
    if len(calls) > len(shown):
        table.caption = f"{len(calls) - len(shown)} more call(s); --all shows every one"
    return table


def chains_table(plan: dict[str, Any]) -> Any | None:
    """A rich Table of the plan's sample chains and their batched decision (``None``: none)."""
    from rich.table import Table

    section = plan.get("batched") or {}
    chains = section.get("chains") or []
    if not chains:
        return None
    batched = [c["id"] for c in chains if c.get("batched")]
    table = Table(
        title=terminal_text(
            f"batched execution ({section.get('mode', 'auto')}, on "
            f"{section.get('device') or 'no device'}): {len(batched)} of {len(chains)} "
            "chain(s) run once per batch",
            None,
        ),
        expand=False,
    )
    table.add_column("chain")
    table.add_column("steps", overflow="fold", max_width=40)
    table.add_column("samples", justify="right")
    table.add_column("batch", justify="right")
    table.add_column("per-sample ms/batch", justify="right")
    table.add_column("batched ms/batch", justify="right")
    table.add_column("backend calls", justify="right")
    table.add_column("batched")
    table.add_column("basis")
    table.add_column("reason", overflow="fold", max_width=60)
    for chain in chains:
        calls = chain.get("backend_calls")
        table.add_row(
            terminal_text(chain.get("id", "")),
            terminal_text(" > ".join(str(s).rsplit(".", 1)[-1] for s in chain.get("steps", []))),
            str(chain.get("samples", 0)),
            str(chain.get("batch_size", 0)),
            _ms(chain.get("original_ns")),
            _ms(chain.get("batched_ns")),
            "-" if calls is None else str(calls),
            "yes" if chain.get("batched") else "no",
            terminal_text(chain.get("basis", "none")),
            terminal_text(chain.get("reason", "")),
            style="green" if chain.get("batched") else "",
        )
    return table

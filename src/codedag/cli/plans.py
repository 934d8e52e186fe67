"""``codedag plans list|show|clear``: the plans ``codedag run`` and ``codedag.accelerate`` keep
across runs."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codedag.cli.args import folder_action
from codedag.cli.output import print_json, stdout_console

if TYPE_CHECKING:
    from codedag.integrations.plan_store import StoredPlan

SHORT_KEY = 12
"""Hex digits of a key that ``plans list`` shows (``plans show`` takes any unique prefix)."""


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``plans`` subcommand (``plans list``, ``plans show KEY``, ``plans clear``)."""
    parser = subparsers.add_parser(
        "plans",
        parents=[parent],
        help="list, show or remove the plans kept across runs",
        description=(
            "`codedag run` and `codedag.accelerate(loader)` keep each pipeline's plan in "
            "plans/<key>.json under the user cache folder (docs/run.md). `plans list` shows them, "
            "`plans show KEY` prints one, `plans clear [KEY ...]` removes them."
        ),
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    texts = {
        "list": "one row per stored plan: pipeline, device, when, size, sections",
        "show": "print a stored plan as `plan explain` does, with what its key stands for",
        "clear": "remove the given plans, or all of them, and nothing else",
    }
    for name, text in texts.items():
        action = actions.add_parser(name, parents=[parent], help=text, description=text)
        if name == "show":
            action.add_argument("key", metavar="KEY", help="the plan's key, or a unique prefix")
            action.add_argument(
                "--all", action="store_true", help="every row of every table (as plan explain)"
            )
        if name == "clear":
            action.add_argument(
                "keys", nargs="*", metavar="KEY", help="keys or unique prefixes (default: all)"
            )
        folder_action(
            action,
            "--cache-dir",
            "the cache folder whose plans/ to use (default: $CODEDAG_CACHE_DIR or the user cache)",
            run,
        )


def run(args: argparse.Namespace) -> int:
    """List, show or remove the stored plans."""
    from codedag.errors import UsageError
    from codedag.integrations.plan_store import PLANS_FOLDER, Unreadable, plans_folder

    if args.folder is not None:
        if Path(args.folder).is_file():
            raise UsageError(f"--dir {args.folder} is a file; expected a folder")
        folder = Path(args.folder) / PLANS_FOLDER
    else:
        folder = plans_folder()
    try:
        if args.action == "list":
            return _list(folder, args.json)
        if args.action == "show":
            return _show(folder, args.key, args.all, args.json)
        return _clear(folder, args.keys, args.json)
    except Unreadable as error:
        raise UsageError(f"{folder}: {error}") from None


def _entries(folder: Path) -> list[StoredPlan]:
    from codedag.integrations.plan_store import stored_plans

    return stored_plans(folder)


def find(entries: list[StoredPlan], key: str, folder: Path) -> StoredPlan:
    """The entry whose key is ``key`` or starts with it.

    Raises:
        UsageError: no entry, or more than one, matches.
    """
    from codedag.errors import UsageError
    from codedag.util.text import printable

    exact = [e for e in entries if e.key == key]
    found = exact or [e for e in entries if key and e.key.startswith(key)]
    if not found:
        raise UsageError(
            f"no stored plan {printable(key, 60)!r} in {folder} (`codedag plans list` shows them)"
        )
    if len(found) > 1:
        keys = ", ".join(e.key for e in found[:5])
        raise UsageError(
            f"{printable(key, 60)!r} is the start of {len(found)} plans' keys ({keys}); give more "
            "of it"
        )
    return found[0]


def sections(entry: StoredPlan) -> dict[str, Any]:
    """What ``entry``'s plan holds: calls (and those moved), batched chains, cached chains,
    lookup-table runs, and whether it sets the DataLoader."""
    plan = entry.plan
    if plan is None:
        return {}
    return {
        "calls": len(plan.calls),
        "moved": sum(1 for c in plan.calls if c.migrate),
        "batched": sum(1 for c in plan.batched.chains if c.batched),
        "cached": len(plan.cache.cached_chains) if plan.cache is not None else 0,
        "tables": len(plan.tables.planned) if plan.tables is not None else 0,
        "loader": plan.loader is not None,
    }


def _row(entry: StoredPlan) -> dict[str, Any]:
    return {
        "key": entry.key,
        "path": str(entry.path),
        "pipeline": entry.inputs.get("pipeline", ""),
        "script": entry.inputs.get("script", ""),
        "device": entry.inputs.get("device", ""),
        "created": entry.created,
        "size_bytes": entry.size_bytes,
        "sections": sections(entry),
        "applies_nothing": None if entry.idle is None else entry.idle.reason,
        "problem": entry.problem,
    }


def _when(created: str) -> str:
    return created.replace("T", " ").removesuffix("+00:00")[:16]


def _list(folder: Path, as_json: bool) -> int:
    from rich.table import Table

    from codedag.util.text import printable

    entries = _entries(folder)
    if as_json:
        print_json({"folder": str(folder), "plans": [_row(e) for e in entries]})
        return 0
    console = stdout_console()
    if not entries:
        console.print(f"no plans stored in {folder}", markup=False)
        return 0
    table = Table(title=f"plans stored in {folder}")
    for column in ("key", "pipeline", "device", "created (UTC)", "KB", "calls moved/all"):
        table.add_column(column, justify="right" if column[0] in "Kc" else "left")
    for column in ("batched", "cached", "tables", "loader"):
        table.add_column(column, justify="right")
    for entry in entries:
        key = entry.key[:SHORT_KEY]
        if entry.plan is None:
            table.add_row(key, f"unreadable: {printable(entry.problem, 200)}")
            continue
        pipeline = entry.inputs.get("pipeline") or "(stored before pipelines were recorded)"
        script = entry.inputs.get("script", "")
        if script:
            pipeline += f" ({Path(script).name})"
        held = sections(entry)
        table.add_row(
            key,
            printable(pipeline, 120),
            printable(entry.inputs.get("device", "") or "-", 20),
            _when(entry.created),
            f"{entry.size_bytes / 1e3:.1f}",
            f"{held['moved']}/{held['calls']}",
            str(held["batched"]),
            str(held["cached"]),
            str(held["tables"]),
            "yes" if held["loader"] else "-",
        )
    console.print(table)
    return 0


def _show(folder: Path, key: str, show_all: bool, as_json: bool) -> int:
    from codedag.cli.plan import explain
    from codedag.errors import SchemaError
    from codedag.util.text import printable

    entry = find(_entries(folder), key, folder)
    if entry.plan is None:
        raise SchemaError(f"stored plan {entry.path} is unreadable: {printable(entry.problem)}")
    if as_json:
        print_json({**_row(entry), "inputs": entry.inputs, "plan": entry.data})
        return 0
    console = stdout_console()
    console.print(f"plan {entry.key} ({entry.path}, {entry.size_bytes / 1e3:.1f} KB)", markup=False)
    inputs = entry.inputs
    if not inputs:
        console.print("made for: not recorded (stored by an earlier codedag)", markup=False)
    for name in ("pipeline", "script", "device"):
        if inputs.get(name):
            console.print(f"{name}: {printable(inputs[name], 300)}", markup=False)
    console.print(f"created: {_when(entry.created)} UTC", markup=False)
    versions = inputs.get("versions") or {}
    if versions:
        text = ", ".join(f"{printable(k, 40)} {printable(v, 40)}" for k, v in versions.items())
        console.print(f"versions: {text}", markup=False)
    code = inputs.get("code") or {}
    if code:
        text = ", ".join(printable(module, 80) for module in code)
        console.print(f"code checked for changes: {text}", markup=False)
    if entry.idle is not None:
        why = entry.idle.reason or "its sections change nothing"
        console.print(f"applies nothing: {printable(why, 300)}", markup=False)
    explain(entry.plan, console, show_all=show_all)
    return 0


def _clear(folder: Path, keys: list[str], as_json: bool) -> int:
    from codedag.integrations.plan_store import open_folder, remove_plan

    entries = _entries(folder)
    chosen = [find(entries, key, folder) for key in keys] if keys else entries
    chosen = list({e.key: e for e in chosen}.values())
    removed: list[StoredPlan] = []
    kept: list[tuple[StoredPlan, str]] = []
    descriptor = open_folder(folder) if chosen else None
    try:
        for entry in chosen:
            assert descriptor is not None
            why = remove_plan(entry, descriptor)
            if why:
                kept.append((entry, why))
            else:
                removed.append(entry)
    finally:
        if descriptor is not None:
            os.close(descriptor)
    freed = sum(e.size_bytes for e in removed)
    if as_json:
        out = {
            "folder": str(folder),
            "removed": [e.key for e in removed],
            "kept": {e.key: why for e, why in kept},
            "freed_bytes": freed,
        }
        print_json(out)
        return 0
    for entry, why in kept:
        print(f"kept {entry.path.name}: {why}", file=sys.stderr)
    count = f"{len(removed)} plan{'' if len(removed) == 1 else 's'}"
    print(f"removed {count} from {folder}: {freed / 1e3:.1f} KB freed")
    return 0

"""``codedag plan explain``: show where a migration plan places each call and why, and what its
prefix cache keeps."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from codedag.cli.output import print_json, stdout_console

if TYPE_CHECKING:
    from rich.console import Console

    from codedag.plan import MigrationPlan


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``plan`` subcommand (``plan explain PLAN``)."""
    parser = subparsers.add_parser(
        "plan",
        parents=[parent],
        help="inspect a migration plan",
        description="Inspect a migration plan: `plan explain PLAN` shows where each call goes and why.",
    )
    actions = parser.add_subparsers(dest="plan_command", metavar="ACTION")
    actions.required = True
    explain = actions.add_parser(
        "explain",
        parents=[parent],
        help="every call: device, measured library and torch times, saving, reason (a "
        "library's internal calls grouped under it)",
    )
    explain.add_argument("plan", help="migration_plan.json")
    explain.add_argument(
        "--all",
        action="store_true",
        help="every call as a row of its own, and every row of the other tables (default: the "
        "top 30 calls, internal calls grouped, and 50 rows of each other table)",
    )
    explain.add_argument("--json", action="store_true", help="print the calls as JSON")
    explain.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Load and validate the plan, print its table (or JSON) and notes."""
    from codedag.plan import read_plan

    plan = read_plan(args.plan)
    if args.json:
        print_json(plan.to_dict()["calls"], indent=2)
        return 0
    console = stdout_console()
    explain(plan, console, show_all=args.all)
    return 0


def print_sections(plan: MigrationPlan, console: Console, show_all: bool = False) -> None:
    """Print ``plan``'s batched chains, cache and tables sections (the top rows of each, or all
    with ``show_all``) and the prefix cache's lines to ``console``."""
    from codedag.optimize.explain import (
        SECTION_ROWS,
        cache_lines,
        cache_table,
        chains_table,
        tables_table,
    )

    rows = None if show_all else SECTION_ROWS
    for table in (chains_table(plan, rows), cache_table(plan, rows), tables_table(plan, rows)):
        if table is not None:
            console.print(table)
    for line in cache_lines(plan):
        console.print(f"prefix cache: {line}", markup=False)


def explain(plan: MigrationPlan, console: Console, show_all: bool = False) -> None:
    """Print ``plan``'s calls, its chains, cache and tables sections, its notes and its loader
    settings to ``console`` (the top rows of each, or all with ``show_all``)."""
    from codedag.backends.admission import admit_plan
    from codedag.optimize.explain import plan_table, random_draw_lines
    from codedag.util.text import printable

    console.print(plan_table(plan, limit=None if show_all else 30, show_all=show_all))
    print_sections(plan, console, show_all)
    for note in plan.notes:
        console.print(f"note: {printable(note)}", markup=False)
    for line in random_draw_lines(plan):
        console.print(f"warning: {line}", markup=False)
    if plan.loader is not None:  # DataLoader settings from `codedag tune`
        console.print(
            f"loader: {plan.loader.chosen.label()}: {printable(plan.loader.reason)}",
            markup=False,
        )
        if plan.loader.warm is not None:
            console.print(
                f"loader, epochs the prefix cache serves: {plan.loader.warm.chosen.label()}: "
                f"{printable(plan.loader.warm.reason)}",
                markup=False,
            )
        kept = plan.loader.kept_line()  # what the migrator will not apply, and the cost
        if kept is not None:
            console.print(f"warning: loader: {printable(kept)}", markup=False)
    unknown = admit_plan(plan).unknown_line()
    if unknown is not None:
        console.print(f"note: {unknown}", markup=False)

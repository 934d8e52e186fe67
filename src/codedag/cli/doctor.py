"""``codedag doctor``: what this machine can do for codedag, and what is missing."""

from __future__ import annotations

import argparse

from codedag.cli.output import print_json, stdout_console


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``doctor`` subcommand."""
    parser = subparsers.add_parser(
        "doctor",
        parents=[parent],
        help="check the environment: versions, GPUs, container limits, energy sources, tools",
        description=(
            "Check Python and package versions, torch and CUDA, each GPU (memory, driver, NVML "
            "energy counter), CPU count and container limits (cgroup v1/v2/hybrid), CPU energy "
            "sources (RAPL, perf), the frequency governor, graphviz, Docker and optional extras. "
            "Each missing piece says what it disables and how to get it."
        ),
    )
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    parser.set_defaults(handler=run)


_STYLE = {"ok": "green", "warn": "yellow", "missing": "red", "info": "cyan"}
_MARK = {"ok": "ok", "warn": "warn", "missing": "missing", "info": "info"}


def run(args: argparse.Namespace) -> int:
    """Run the checks and print them as a table or JSON; exit 0 (missing pieces are not errors)."""
    from codedag.doctor import run_doctor

    report = run_doctor()
    if args.json:
        print_json(report.to_dict(), indent=2, default=str)
        return 0
    from rich.table import Table
    from rich.text import Text

    console = stdout_console()
    table = Table(title="codedag doctor", show_lines=False, expand=False)
    table.add_column("section", style="bold")
    table.add_column("check")
    table.add_column("status")
    table.add_column("value")
    table.add_column("what it means", overflow="fold", max_width=70)
    previous = None
    for check in report.checks:
        section = check.section if check.section != previous else ""
        previous = check.section
        table.add_row(
            Text(section),
            Text(check.name),
            Text(_MARK.get(check.status, check.status), style=_STYLE.get(check.status, "")),
            Text(check.value),
            Text(check.detail),
        )
    console.print(table)
    missing = sum(1 for c in report.checks if c.status == "missing")
    console.print(f"{missing} missing piece(s); see 'what it means' for what each disables.")
    return 0

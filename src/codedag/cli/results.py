"""``codedag results``: list and filter the energy sessions of a results folder, export CSV."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from codedag.cli.output import print_json, stdout_console


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``results`` subcommand."""
    parser = subparsers.add_parser(
        "results",
        parents=[parent],
        help="list and filter energy sessions and experiments; export CSV",
        description=(
            "Query the SQLite database that codedag mutate keeps under the results folder. "
            "Without filters: one line per session. With --experiments or any filter: the "
            "matching experiments. --csv writes them with summary.csv's columns plus the session."
        ),
    )
    parser.add_argument(
        "--results-dir", default="results", help="results folder (default: results)"
    )
    parser.add_argument("--session", help="only this session (e.g. run_20251113_150000)")
    parser.add_argument("--repo", help="only this repository")
    parser.add_argument("--model", help="only this model")
    status = parser.add_mutually_exclusive_group()
    status.add_argument("--succeeded", action="store_true", help="only successful experiments")
    status.add_argument("--failed", action="store_true", help="only failed experiments")
    parser.add_argument("--experiments", action="store_true", help="list experiments, not sessions")
    parser.add_argument(
        "--csv", metavar="PATH", help="export matching experiments as CSV ('-': stdout)"
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Print sessions or experiments, or export CSV."""
    from codedag.energy.store import DB_NAME
    from codedag.errors import ConfigError

    if args.csv is not None and args.csv != "-":
        from codedag.util.paths import check_output_file

        check_output_file(args.csv, "--csv")
    results_dir = Path(args.results_dir)
    if not (results_dir / DB_NAME).is_file():
        raise ConfigError(
            f"no results database at {results_dir / DB_NAME}; run codedag mutate first"
        )
    return _query(args, results_dir)  # a database that is not ours: ConfigError naming it


def _query(args: argparse.Namespace, results_dir: Path) -> int:
    from codedag.energy.store import ResultsDB, render_csv

    db = ResultsDB(results_dir)
    success = True if args.succeeded else False if args.failed else None
    filtered = any(v is not None for v in (args.session, args.repo, args.model, success))
    if args.csv is not None or args.experiments or filtered:
        records = db.experiments(args.session, args.repo, args.model, success)
        if args.csv is not None:
            text = render_csv(records, extra_base=["session"])
            if args.csv == "-":
                sys.stdout.write(text)
            else:
                from codedag.util.io import atomic_write_text

                atomic_write_text(args.csv, text)
                print(f"wrote {len(records)} experiment(s) to {args.csv}", file=sys.stderr)
            return 0
        if args.json:
            print_json(records, indent=2, default=str)
            return 0
        _print_experiments(records)
        return 0
    sessions = db.sessions()
    if args.json:
        print_json(sessions, indent=2, default=str)
        return 0
    _print_sessions(sessions)
    return 0


def _fmt(value: object) -> str:
    return f"{value:.1f}" if isinstance(value, int | float) else "n/a"


def _print_sessions(sessions: list[dict]) -> None:
    from rich.table import Table

    table = Table(title="energy sessions")
    for column in ("session", "name", "status", "started", "experiments", "ok", "CPU J", "GPU J"):
        table.add_column(column)
    for s in sessions:
        table.add_row(
            str(s["session"]),
            str(s["experiment_name"] or ""),
            str(s["status"] or ""),
            str(s["started"] or ""),
            str(s["experiments"]),
            str(s["succeeded"]),
            _fmt(s["cpu_energy_j"]),
            _fmt(s["gpu_energy_j"]),
        )
    stdout_console().print(table)


def _print_experiments(records: list[dict]) -> None:
    from rich.table import Table

    table = Table(title=f"{len(records)} experiment(s)")
    for column in (
        "session",
        "experiment",
        "ok",
        "time s",
        "hyperparameters",
        "metrics",
        "CPU J",
        "GPU J",
    ):
        table.add_column(column)
    for r in records:
        energy = r.get("energy_metrics", {})
        table.add_row(
            str(r["session"]),
            str(r["experiment_id"]),
            "yes" if r.get("training_success") else "no",
            _fmt(r.get("duration_seconds")),
            ", ".join(f"{k}={v}" for k, v in r.get("hyperparameters", {}).items()),
            ", ".join(f"{k}={v:g}" for k, v in r.get("performance_metrics", {}).items()),
            _fmt(energy.get("cpu_energy_total_joules")),
            _fmt(energy.get("gpu_energy_total_joules")),
        )
    stdout_console().print(table)

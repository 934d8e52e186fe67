"""``codedag report results.json --out DIR``: comparison table and plots of a monitored run, or
the summary and ``report.html`` of an accelerated one (``codedag run``, ``codedag.accelerate``)."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codedag.cli.output import figure, print_json, stdout_console

if TYPE_CHECKING:
    from codedag.monitor.model import RunResults


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``report`` subcommand."""
    parser = subparsers.add_parser(
        "report",
        aliases=["compare"],
        parents=[parent],
        help="compare the modes of results.json files and render their plots (alias: compare)",
        description=(
            "Print a comparison table of the modes recorded by ExperimentMonitor (batch time "
            "mean/std/p50/p95, data-wait share, throughput, speedup, loss and accuracy deltas) "
            "and render the comparison figures as PNG. Several files (e.g. a baseline run and an "
            "optimization run made by separate processes) are compared as one. A run under "
            "torchrun (one folder per rank) is read as one: give any rank's folder, or the "
            "results folder, and get each rank's figures and the aggregate (samples/s summed, "
            "data wait per rank, slowest rank)."
        ),
    )
    parser.add_argument(
        "results",
        nargs="+",
        help="results.json written by ExperimentMonitor, its run folder, or a folder of run "
        "folders (its newest run) (one or more); or one written by codedag run, "
        "codedag.accelerate or the Lightning callback: its summary, and its report.html "
        "written into --out (default: beside it)",
    )
    parser.add_argument(
        "--out", metavar="DIR", help="folder for the PNG figures (default: <results dir>/plots)"
    )
    parser.add_argument("--baseline", metavar="MODE", help="reference mode (default: 'baseline')")
    parser.add_argument("--no-plots", action="store_true", help="print the table only")
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="recompute the results from the raw CSV streams next to the JSON (a run killed "
        "between two flushes, or exact figures of a long, downsampled run)",
    )
    parser.add_argument("--json", action="store_true", help="print the comparison as JSON")
    parser.set_defaults(handler=run)


def _signed(value: object, digits: int = 4) -> str:
    return "-" if value is None else f"{value:+.{digits}f}"


def _batches(row: dict[str, Any]) -> str:
    if row["num_batches"] is None:
        return "-"
    warm = row["warmup_batches"] if row["steady_batches"] is not None else 0
    return f"{row['num_batches']}" + (f" ({warm} warm-up)" if warm else "")


def speedup_text(row: dict[str, Any]) -> str:
    """``2.01x ± 0.03``, ``no difference (1.02x ± 0.05)`` or, without a spread, ``1.07x``."""
    if row["speedup"] is None:
        return "-"
    if row["speedup_spread"] is None:
        return f"{row['speedup']:.2f}x"
    text = f"{row['speedup']:.2f}x ± {row['speedup_spread']:.2f}"
    return f"no difference ({text})" if row["difference"] == "no difference" else text


def steady_caption(rows: list[dict[str, Any]]) -> str:
    """What the figures leave out, in words."""
    warm = sorted({r["warmup_batches"] for r in rows if r["steady_batches"] is not None})
    if not warm:
        return "every batch counted (the file has no steady-state figures); speedup: mean step"
    n = ", ".join(map(str, warm))
    return (
        f"steady state: the first {n} batch(es) of each mode left out as warm-up; speedup: "
        "median step time with its 95 % interval, 'no difference' when the interval holds 1"
    )


def _loader(rebuild: bool) -> Callable[[Path], RunResults]:
    """How a results file is read: as written, or recomputed from its raw CSV streams."""
    if rebuild:
        from codedag.monitor.rebuild import rebuild_results

        return rebuild_results
    from codedag.monitor.results import load_results

    return load_results


def _accelerated_run(path: Path) -> Any:
    """The parsed results of ``codedag run`` or ``codedag.accelerate`` in ``path``, or None for
    anything else (an experiment's results, or a file the experiment reader will refuse)."""
    import json

    from codedag.integrations.run_results import is_run_results

    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):  # not text, not JSON, nested past the stack
        return None  # the experiment reader says what is wrong with it
    return data if is_run_results(data) else None


def _report_accelerated_run(args: argparse.Namespace, path: Path, data: Any) -> int:
    """Print an accelerated run's summary and write its ``report.html`` (into ``--out``, else
    beside the file)."""
    from codedag.cli._run_report import REPORT_FILE, write_run_report
    from codedag.integrations.run_results import run_results_of
    from codedag.integrations.run_summary import summary_lines
    from codedag.util.paths import check_output_dir

    results = run_results_of(data, path)
    folder = check_output_dir(args.out if args.out is not None else path.parent, "--out")
    page = write_run_report(results, folder / REPORT_FILE) if not args.no_plots else None
    if args.json:
        print_json({"results": str(path), "report": None if page is None else str(page)})
        return 0
    for line in summary_lines(results, results.loader_index or 0, f"codedag report {path}"):
        print(line)
    if page is not None:
        print(f"report in {page}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Load, compare, plot and print."""
    from codedag.monitor.compare import compare_modes
    from codedag.monitor.results import merge_results
    from codedag.report.ranks import collect_ranks, results_file

    paths = [results_file(Path(p)) for p in args.results]
    path = paths[0]
    accelerated = _accelerated_run(path) if len(paths) == 1 else None
    if accelerated is not None:
        return _report_accelerated_run(args, path, accelerated)
    out = Path(args.out) if args.out is not None else path.parent / "plots"
    if not args.no_plots:
        from codedag.util.paths import check_output_dir

        check_output_dir(
            args.out if args.out is not None else out,
            "--out" if args.out is not None else "--out (default)",
        )
    load = _loader(args.rebuild)
    loaded = [load(p) for p in paths]
    ranked = collect_ranks(paths, loaded, load=load)
    if ranked is not None:
        from codedag.cli._report_ranks import report_ranks

        return report_ranks(args, ranked)
    results = merge_results(loaded)
    rows = compare_modes(results, args.baseline)
    figures: list[str] = []
    if not args.no_plots:
        from codedag.monitor.plots import plot_results
        from codedag.util.paths import output_lock

        with output_lock(out, "--out" if args.out is not None else "--out (default)"):
            figures = [str(p) for p in plot_results(results, out)]
    if args.json:
        print_json({"modes": rows, "figures": figures}, indent=2)
        return 0
    from rich.table import Table

    from codedag.util.text import terminal_text

    title = f"{results.experiment_name} ({', '.join(map(str, paths))})"
    table = Table(title=terminal_text(title, 500))
    for column in (
        "mode", "status", "batches", "batch mean ms", "std", "p50", "p95", "data wait",
        "step ms", "batches/s", "samples/s", "speedup", "Δ loss", "Δ acc",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column in ("mode", "status") else "right")
    for r in rows:
        table.add_row(
            terminal_text(r["mode"] + (" (ref)" if r["is_baseline"] else ""), 80),
            terminal_text(r["status"], 80),
            _batches(r),
            figure(r["batch_mean_s"], 1e3),
            figure(r["batch_std_s"], 1e3),
            figure(r["batch_p50_s"], 1e3),
            figure(r["batch_p95_s"], 1e3),
            figure(r["data_wait_share_pct"], digits=1, suffix="%"),
            figure(r["step_mean_s"], 1e3)
            + ("" if r["step_std_s"] is None else f" ± {r['step_std_s'] * 1e3:.2f}"),
            figure(r["batches_per_s"], digits=1),
            figure(r["samples_per_s"], digits=0),
            "1.00x" if r["is_baseline"] else speedup_text(r),
            _signed(r["loss_delta"]),
            _signed(r["accuracy_delta"]),
        )
    table.caption = steady_caption(rows)
    # piped output keeps every column instead of folding to 80 characters
    console = stdout_console(200)
    console.print(table)
    if figures:
        console.print(terminal_text(f"{len(figures)} figures in {Path(figures[0]).parent}"))
    return 0

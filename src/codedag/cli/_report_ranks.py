"""``codedag report`` of a multi-rank run: one table with every rank and the aggregate per mode."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from codedag.cli.output import figure, print_json, stdout_console
from codedag.report.ranks import RankedRun, aggregate_rows, plot_ranks, rank_rows
from codedag.util.text import terminal_text


def _figures(row: dict[str, Any], wait_suffix: str) -> list[str]:
    """The cells from status to speedup of a rank's row or of a mode's aggregate."""
    return [
        terminal_text(row["status"], 80),
        str(row["num_batches"] if row["num_batches"] is not None else "-"),
        figure(row["batch_mean_s"], 1e3),
        figure(row["batch_p95_s"], 1e3),
        figure(row["data_wait_share_pct"], digits=1, suffix=wait_suffix),
        figure(row["step_mean_s"], 1e3),
        figure(row["batches_per_s"], digits=1),
        figure(row["samples_per_s"], digits=0),
        figure(row["speedup"], suffix="x"),
    ]


def report_ranks(args: argparse.Namespace, run: RankedRun) -> int:
    """Print (or emit as JSON) the per-rank rows and the aggregate, and render the figures.

    The figures go to ``--out``, else ``plots_ranks/`` in the folder of the lowest rank.
    """
    rows = rank_rows(run, args.baseline)
    totals = aggregate_rows(rows, args.baseline)
    figures: list[str] = []
    if not args.no_plots:
        lowest = run.paths[min(run.paths)][0]
        out = Path(args.out) if args.out else lowest.parent / "plots_ranks"
        figures = [str(p) for p in plot_ranks(run, out, args.baseline)]
    if args.json:
        payload = {
            "experiment_name": run.experiment_name,
            "world_size": run.world_size,
            "files": {str(r): [str(p) for p in paths] for r, paths in run.paths.items()},
            "modes": totals,
            "ranks": rows,
            "figures": figures,
        }
        print_json(payload, indent=2)
        return 0
    from rich.table import Table

    table = Table(title=terminal_text(f"{run.experiment_name}: {run.world_size} ranks", 500))
    for column in (
        "mode", "rank", "status", "batches", "batch mean ms", "p95", "data wait", "step ms",
        "batches/s", "samples/s", "speedup", "slowest",
    ):  # fmt: skip
        table.add_column(column, justify="left" if column in ("mode", "status") else "right")
    for total in totals:
        for row in (r for r in rows if r["mode"] == total["mode"]):
            table.add_row(
                terminal_text(row["mode"], 80),
                str(row["rank"]),
                *_figures(row, "%"),
                "*" if total["slowest_rank"] == row["rank"] else "",
            )
        imbalance = total["imbalance"]
        table.add_row(
            terminal_text(total["mode"] + (" (ref)" if total["is_baseline"] else ""), 80),
            f"all {len(total['ranks'])}",
            *_figures(total, "% mean"),
            f"rank {total['slowest_rank']} ({imbalance:.2f}x)" if imbalance else "-",
            end_section=True,
        )
    console = stdout_console(200)
    console.print(table)
    console.print(
        "all N: samples/s and batches/s summed over the ranks, step ms of the slowest rank "
        "(the one DDP waits for; in brackets its step time over the fastest rank's), "
        "speedup = summed throughput over the reference mode's"
    )
    if figures:
        where = f"{Path(figures[-1]).parent} (rank<R>/, ranks.png)"
        console.print(terminal_text(f"{len(figures)} figures in {where}"))
    return 0

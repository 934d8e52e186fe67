"""``report.html`` of ``codedag run``: the run's epochs as a table and two charts, the prefix
cache, and what the plan moved and kept, beside its ``results.json``."""

from __future__ import annotations

import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codedag.integrations.run_results import AcceleratedRun, Decision, EpochFigures
from codedag.integrations.run_summary import (
    cache_line,
    epoch_rows,
    grouped_decisions,
    no_backend_text,
)
from codedag.report.html import ReportContent, TitledTable, write_html_report
from codedag.report.svg_bars import Bar, bar_chart_svg

REPORT_FILE = "report.html"
_LEGEND = (
    "Bars: dark blue where the plan served the whole epoch, light blue where it served part of "
    "it, grey where it served none."
)


def _kind(epoch: EpochFigures) -> str:
    """How an epoch's bar is coloured: served by the plan, in part, or not at all."""
    if not epoch.planned:
        return "off"
    return "partly" if epoch.plan_from_batch else "on"


def _charts(results: AcceleratedRun) -> list[str]:
    _, rows = epoch_rows(results)
    if not rows:
        return []

    def bars(value: Callable[[EpochFigures], float]) -> list[Bar]:
        return [
            Bar(str(r.figures.epoch), value(r.figures), _kind(r.figures), f"plan {r.plan}")
            for r in rows
        ]

    return [
        bar_chart_svg("Samples per second, by epoch", bars(lambda e: e.samples_per_s)),
        bar_chart_svg("Data wait per epoch", bars(lambda e: e.data_wait_s), "s"),
    ]


def _decision_table(title: str, rows: list[Decision]) -> TitledTable | None:
    plain, rows = grouped_decisions(rows)
    body: list[list[Any]] = [[r.section, r.what, r.where, r.reason] for r in rows]
    if plain:
        body.append(["calls", no_backend_text(plain, None), "", "nothing patches them"])
    if not body:
        return None
    return TitledTable(title, ["section", "what", "where", "reason"], body)


def run_report(results: AcceleratedRun) -> ReportContent:
    """What the page of one accelerated run shows."""
    command = " ".join(shlex.quote(part) for part in results.command[1:])
    python = "python -m" if results.command[:1] == ["module"] else "python"
    base, rows = epoch_rows(results)
    summary: list[list[Any]] = [
        ["command", f"codedag run -- {python} {command}"],
        ["exit code", "-" if results.exit_code is None else results.exit_code],
        ["plan", results.plan_status + (f": {results.plan_reason}" if results.plan_reason else "")],
    ]
    if results.loader_index is not None:
        summary.append(["DataLoader", f"#{results.loader_index} over {results.dataset}"])
    if results.device:
        summary.append(["device", results.device])
    if results.trace_s or results.plan_s:
        summary.append(["traced, planned", f"{results.trace_s:.2f} s, {results.plan_s:.2f} s"])
    if results.plan_path:
        summary.append(["stored plan", results.plan_path])
    if results.cache.get("enabled"):
        summary.append(["prefix cache", cache_line(results.cache).partition(": ")[2]])
    epochs = [
        [
            r.figures.epoch,
            r.figures.batches,
            r.figures.samples,
            round(r.figures.epoch_s, 3),
            round(r.figures.samples_per_s, 1),
            "-" if r.against_first is None else f"{r.against_first:.2f}x",
            round(r.figures.data_wait_s, 3),
            "-" if r.wait_share is None else f"{100 * r.wait_share:.0f} %",
            r.plan,
        ]
        for r in rows
    ]
    tables = [_decision_table("Moved", results.moved), _decision_table("Kept", results.kept)]
    return ReportContent(
        title="codedag run",
        subtitle=f"codedag {results.codedag_version}",
        summary_columns=["", ""],
        summary_rows=summary,
        epoch_columns=[
            "epoch",
            "batches",
            "samples",
            "time s",
            "samples/s",
            f"vs epoch {base}",
            "data wait s",
            "wait share",
            "plan",
        ],
        epoch_rows=epochs,
        charts=_charts(results),
        notes=[_LEGEND] if rows else [],
        more_tables=[t for t in tables if t is not None],
    )


def write_run_report(results: AcceleratedRun, path: Path) -> Path:
    """Write the run's page to ``path`` atomically; return it."""
    return write_html_report(path, run_report(results))

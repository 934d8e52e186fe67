"""``codedag trace --show``: the traced pipeline as one sample's chain, in the terminal and HTML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from codedag.graph.model import ExecutionDAG
from codedag.report.chain_view import ChainView


def write_chain_page(
    dag: ExecutionDAG, out: Path, plan_path: str | None, written: list[Path]
) -> tuple[ChainView, Path]:
    """Build the chain view (with the plan's placements) and write ``out/dag.html``.

    The full DAG is the SVG this trace wrote, when it wrote one.

    Raises:
        SchemaError: ``plan_path`` is not a migration plan.
    """
    from codedag.plan import read_plan
    from codedag.report.chain_view import chain_view
    from codedag.report.html import ReportContent, write_html_report

    plan: dict[str, Any] | None = None
    if plan_path:
        plan = read_plan(plan_path, source=f"--plan {plan_path!r}").to_dict()
    view = chain_view(dag, plan)
    svg = next((p for p in written if p.suffix == ".svg"), None)
    stats = dag.stats()
    page = write_html_report(
        out / "dag.html",
        ReportContent(
            title="codedag trace",
            subtitle=f"{stats['calls']} calls, {stats['values']} values, {stats['edges']} edges",
            chain=view,
            dag_svg=svg.read_text() if svg is not None else None,
        ),
    )
    return view, page


def print_chain(view: ChainView) -> None:
    """The chain as a table: each step's time per sample, share, and where it runs."""
    from rich.console import Console
    from rich.table import Table

    title = (
        f"each of {view.samples} sample(s): {view.sample_ms:.3f} ms, "
        f"{view.samples_share_pct:.0f} % of the batch ({view.batch_ms:.2f} ms)"
    )
    table = Table(title=title, caption="ms and share: per sample; batch rows: per batch")
    for column in ("step", "call", "ms", "share", "samples", "runs"):
        left = column in ("call", "runs")
        table.add_column(column, justify="left" if left else "right", overflow="fold")
    for label, boxes in (("batch", view.before), ("", view.steps), ("batch", view.after)):
        for index, box in enumerate(boxes, 1):
            table.add_row(
                label or str(index),
                box.name,
                f"{box.ms:.3f}",
                f"{box.share_pct:.1f} %",
                "-" if label else f"{box.samples}/{view.samples}",
                box.where,
            )
    Console().print(table)

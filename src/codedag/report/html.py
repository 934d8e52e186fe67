"""One self-contained HTML report: summary, epochs, equivalence, plan, prefix cache, chain view,
DAG, plots, environment.

Everything is inline (PNG as data URIs, SVG as markup, CSS in the page), so the file can be
mailed or attached to an issue and opens without network. A small inline script marks the page
``data-rendered="ok"`` once every image has decoded, which the browser test reads.
"""

from __future__ import annotations

import base64
import html
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codedag.report.chain_html import CHAIN_CSS, DAG_SCRIPT, chain_section, dag_explorer
from codedag.report.chain_view import ChainView
from codedag.util.io import atomic_write_text
from codedag.util.text import html_text

_CSS = """
body { font-family: -apple-system, Segoe UI, Helvetica, Arial, sans-serif; margin: 2rem auto;
       max-width: 1200px; color: #1d2430; line-height: 1.45; padding: 0 1rem; }
h1 { font-size: 1.6rem; margin-bottom: 0.2rem; } h2 { margin-top: 2.2rem; font-size: 1.25rem;
     border-bottom: 1px solid #d8dee8; padding-bottom: 0.3rem; }
.sub { color: #5b6575; margin-top: 0; }
table { border-collapse: collapse; margin: 0.6rem 0; font-size: 0.9rem; }
th, td { border: 1px solid #d8dee8; padding: 0.3rem 0.6rem; text-align: left; vertical-align: top; }
th { background: #f2f5f9; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
.ok { color: #1a7f37; font-weight: 600; } .bad { color: #c62828; font-weight: 600; }
.note { background: #f6f8fa; border-left: 4px solid #8aa4c8; padding: 0.5rem 0.8rem; }
figure { margin: 1rem 0; } figure img { max-width: 100%; border: 1px solid #e3e8ef; }
figcaption { color: #5b6575; font-size: 0.85rem; }
.dag { overflow: auto; max-height: 900px; border: 1px solid #e3e8ef; padding: 0.5rem; }
.dag svg { max-width: 100%; height: auto; }
pre { background: #f6f8fa; padding: 0.6rem; overflow: auto; font-size: 0.8rem; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5rem; margin: 1rem 0; }
.legend span { display: inline-block; padding: 0.1rem 0.5rem; margin-right: 0.4rem;
               border-radius: 3px; font-size: 0.85rem; }
"""

_SCRIPT = """
window.addEventListener('load', function () {
  var images = Array.prototype.slice.call(document.images);
  var broken = images.filter(function (i) { return !i.complete || i.naturalWidth === 0; });
  document.body.setAttribute('data-images', String(images.length));
  document.body.setAttribute('data-broken-images', String(broken.length));
  document.body.setAttribute('data-svgs', String(document.querySelectorAll('svg').length));
  document.body.setAttribute('data-rendered', broken.length === 0 ? 'ok' : 'broken');
});
"""


@dataclass(frozen=True)
class TitledTable:
    """A table with a heading of its own (what a run moved, what it kept)."""

    title: str
    columns: Sequence[str]
    rows: Sequence[Sequence[Any]]


@dataclass
class ReportContent:
    """What goes into the report; every part is optional but the title."""

    title: str
    subtitle: str = ""
    summary_columns: Sequence[str] = ()
    summary_rows: Sequence[Sequence[Any]] = ()
    equivalence: dict[str, Any] | None = None
    plan: dict[str, Any] | None = None
    dag_svg: str | None = None
    dag_dot: str | None = None
    partition_colors: dict[str, str] = field(default_factory=dict)
    plots: Sequence[Path] = ()
    environment: dict[str, Any] = field(default_factory=dict)
    notes: Sequence[str] = ()
    loader: dict[str, Any] | None = None  # a plan's loader section (codedag tune)
    epoch_columns: Sequence[str] = ()
    epoch_rows: Sequence[Sequence[Any]] = ()  # the figures of each epoch of each mode
    cache: dict[str, Any] | None = None  # a plan's cache section (the prefix cache's cuts)
    cache_stats: dict[str, Any] | None = None  # the run's get_stats()["cache"]
    tables: dict[str, Any] | None = None  # a plan's tables section (lookup-table runs)
    tables_stats: dict[str, Any] | None = None  # the run's get_stats()["tables"]
    chain: ChainView | None = None  # the traced pipeline as one sample's chain
    charts: Sequence[str] = ()  # inline SVG charts shown under the epochs
    more_tables: Sequence[TitledTable] = ()  # shown after the notes


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f'<td class="num">{value:.4g}</td>'
    if isinstance(value, int) and not isinstance(value, bool):
        return f'<td class="num">{value}</td>'
    return f"<td>{html_text(value)}</td>"


def _table(columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html_text(c)}</th>" for c in columns)
    body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
    thead = f"<thead><tr>{head}</tr></thead>" if any(columns) else ""  # a list of name, value
    return f"<table>{thead}<tbody>{body}</tbody></table>"


def _inline_svg(svg: str) -> str:
    """SVG markup without its XML prolog and doctype, safe to embed in HTML."""
    svg = re.sub(r"<\?xml[^>]*\?>", "", svg)
    svg = re.sub(r"<!DOCTYPE[^>]*>", "", svg, flags=re.IGNORECASE)
    svg = re.sub(r"<script.*?</script>", "", svg, flags=re.IGNORECASE | re.DOTALL)
    return svg.strip()


def _png_figure(path: Path) -> str:
    data = base64.b64encode(Path(path).read_bytes()).decode("ascii")
    caption = Path(path).stem.replace("_", " ")
    return (
        f'<figure><img alt="{html_text(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html_text(caption)}</figcaption></figure>"
    )


def _ms_or_dash(ns: Any) -> Any:
    return "-" if ns is None else float(ns) / 1e6


def _plan_section(plan: dict[str, Any]) -> str:
    # Calls with measured figures or placed first: the ones a reader wants to see.
    calls = sorted(
        plan.get("calls", []),
        key=lambda c: (
            not c.get("migrate"),
            c.get("original_ns") is None,
            -c.get("measured_ns", 0),
        ),
    )
    rows = []
    for call in calls:
        original, backend = call.get("original_ns"), call.get("backend_ns")
        rows.append(
            [
                call.get("function", "?"),
                call.get("device", "?"),
                "yes" if call.get("migrate") else "no",
                int(call.get("instance_count", 1) or 1),
                _ms_or_dash(original),
                _ms_or_dash(backend),
                f"{original / backend:.2f}x" if original and backend else "-",
                call.get("reason", ""),
            ]
        )
    columns = [
        "function",
        "device",
        "migrated",
        "calls",
        "library ms/call",
        "torch ms/call",
        "speedup",
        "reason",
    ]
    parts = [
        f"<p>{len(plan.get('context_device_map', {}))} call context(s) to migrate; "
        f"target device <code>{html_text(plan.get('target_device'))}</code>; "
        f"k = {html_text(plan.get('k'))}, GPUs = {html_text(plan.get('gpu_count'))}.</p>"
    ]
    parts.append(_table(columns, rows) if rows else "<p>The plan places no call.</p>")
    parts += [f'<p class="note">{html_text(note)}</p>' for note in plan.get("notes", [])]
    return "".join(parts)


def _equivalence_section(result: dict[str, Any]) -> str:
    passed = bool(result.get("passed"))
    verdict = '<span class="ok">equal</span>' if passed else '<span class="bad">different</span>'
    rows = [[k, v] for k, v in result.items() if k != "passed"]
    return f"<p>Migrated batches vs baseline batches: {verdict}.</p>" + _table(
        ["field", "value"], rows
    )


def _plan_sections(content: ReportContent) -> list[str]:
    """The plan's sections: placement, prefix cache, lookup tables, DataLoader settings."""
    parts: list[str] = []
    if content.plan is not None:
        parts += ["<h2>Migration plan</h2>", _plan_section(content.plan)]
    if content.cache is not None:
        from codedag.report.cache import cache_section_html

        parts += ["<h2>Prefix cache</h2>", cache_section_html(content.cache, content.cache_stats)]
    if content.tables is not None:
        from codedag.report.tables import tables_section_html

        parts += [
            "<h2>Lookup tables</h2>",
            tables_section_html(content.tables, content.tables_stats),
        ]
    if content.loader is not None:
        from codedag.report.loader import loader_section_html

        parts += ["<h2>DataLoader settings</h2>", loader_section_html(content.loader)]
    return parts


def render_html(content: ReportContent) -> str:
    """Render the whole page as a string."""
    parts = [
        "<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'>",
        f"<title>{html_text(content.title)}</title><style>{_CSS}{CHAIN_CSS}</style></head><body>",
        f"<h1>{html_text(content.title)}</h1>",
    ]
    if content.subtitle:
        parts.append(f'<p class="sub">{html_text(content.subtitle)}</p>')
    if content.summary_rows:
        parts += ["<h2>Summary</h2>", _table(content.summary_columns, content.summary_rows)]
    if content.epoch_rows:
        parts += ["<h2>Epochs</h2>", _table(content.epoch_columns, content.epoch_rows)]
    if content.charts:
        charts = "".join(_inline_svg(chart) for chart in content.charts)
        parts.append(f'<div class="charts">{charts}</div>')
    parts += [f'<p class="note">{html_text(note)}</p>' for note in content.notes]
    for table in content.more_tables:
        parts += [f"<h2>{html_text(table.title)}</h2>", _table(table.columns, table.rows)]
    if content.equivalence is not None:
        parts += ["<h2>Equivalence check</h2>", _equivalence_section(content.equivalence)]
    parts.extend(_plan_sections(content))
    if content.chain is not None:
        parts += ["<h2>Pipeline: the chain of one sample</h2>", chain_section(content.chain)]
    if content.dag_svg or content.dag_dot:
        parts.append("<h2>Execution DAG</h2>")
        if content.partition_colors:
            legend = "".join(
                f'<span style="background:{html_text(color)}">{html_text(name)}</span>'
                for name, color in content.partition_colors.items()
            )
            parts.append(f'<p class="legend">Partitions: {legend}</p>')
        if content.dag_svg:
            parts.append(dag_explorer(_inline_svg(content.dag_svg)))
        else:
            parts.append(
                "<p class='note'>graphviz <code>dot</code> was not available, so the DAG is "
                "shown as DOT text; render it with <code>dot -Tsvg dag.dot -o dag.svg</code>.</p>"
            )
            # DOT text quotes every name through dot_string, so it holds no control characters
            parts.append(f"<pre>{html.escape(content.dag_dot or '', quote=True)}</pre>")
    if content.plots:
        parts.append("<h2>Metrics</h2>")
        parts.extend(_png_figure(p) for p in content.plots)
    if content.environment:
        parts += [
            "<h2>Environment</h2>",
            _table(["", ""], [[k, v] for k, v in content.environment.items()]),
        ]
    parts.append(f"<script>{DAG_SCRIPT}{_SCRIPT}</script></body></html>")
    return "\n".join(parts)


def write_html_report(path: str | Path, content: ReportContent) -> Path:
    """Render and write the report atomically; returns its path."""
    return atomic_write_text(path, render_html(content))

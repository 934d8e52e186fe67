"""The HTML section of a plan's ``tables`` section: where element-wise runs start, and what the
run counted (runs gathered through a table or computed by their calls, mismatches, failures)."""

from __future__ import annotations

from typing import Any

from codedag.report.cache import _e, _num, _short, _table


def _run_row(run: dict[str, Any]) -> str:
    callers = ", ".join(_e(c.rsplit(".", 2)[-2]) for c in run.get("callers", [])) or "anywhere"
    calls = " &gt; ".join(_e(_short(c)) for c in run.get("calls", []))
    return (
        f"<tr><td>{_e(run.get('producer', ''))}</td><td>{callers}</td><td>{calls}</td>"
        f"<td>{_e(run.get('consumer', '') or '-')}</td>"
        + _num(run.get("traced_ns", 0) / 1e6)
        + "</tr>"
    )


def tables_section_html(section: dict[str, Any], stats: dict[str, Any] | None = None) -> str:
    """The runs the plan starts, then the run's counters when ``stats``
    (``get_stats()["tables"]``) is given."""
    parts = [
        "<p>Element-wise runs on uint8 arrays (a normalization) gathered through a table of "
        "their 256 values per channel, used where it matched the calls bit for bit and was "
        "faster on each process's first samples.</p>",
        _table(
            ["producer", "called from", "calls", "then", "traced ms"],
            [_run_row(r) for r in section.get("runs", [])],
        ),
    ]
    if stats and stats.get("enabled"):
        rows = [
            ("runs started", stats.get("runs", 0)),
            ("gathered through a table", stats.get("gathered", 0)),
            ("computed by their calls (trials, tables that did not pay)", stats.get("computed", 0)),
            ("trials (mismatches)", f"{stats.get('trials', 0)} ({stats.get('mismatches', 0)})"),
            ("batches run again without tables", stats.get("errors", 0)),
        ]
        body = [f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows]
        parts += ["<p>What the optimized run counted (all processes):</p>", _table(["", ""], body)]
    return "".join(parts)

"""The HTML section of a plan's ``cache`` section: each chain's cut and figures, and what the run
counted (hits, misses by reason, bytes in RAM and on disk, evictions, verification)."""

from __future__ import annotations

import html
from typing import Any

from codedag.migrate.cache.reasons import MISS_REASONS


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _num(value: float, digits: str = ".3g") -> str:
    return f'<td class="num">{value:{digits}}</td>'


def _table(head: list[str], rows: list[str]) -> str:
    cells = "".join(f"<th>{_e(c)}</th>" for c in head)
    return f"<table><thead><tr>{cells}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _chain_row(chain: dict[str, Any]) -> str:
    cut = chain.get("cut") if chain.get("cached") else None
    steps = " &gt; ".join(_e(_short(s)) for s in chain.get("steps", []))
    source = f"{_e(chain.get('source_function', ''))} ({_e(chain.get('source_kind', ''))})"
    if cut is None:
        figures = "<td>-</td>" + '<td class="num">-</td>' * 4
    else:
        figures = (
            f"<td>{_e(cut['step'])}</td>"
            + _num(cut.get("bytes_per_sample", 0) / 1e6)
            + _num(cut.get("prefix_ns", 0) / 1e6)
            + _num(cut.get("read_ns", 0) / 1e6)
            + _num(cut.get("saved_ns", 0) / 1e6)
        )
    cached = '<span class="ok">yes</span>' if cut is not None else "no"
    return (
        f"<tr><td>{_e(chain.get('id', ''))}</td><td>{source}</td><td>{steps}</td>{figures}"
        f"<td>{cached}</td><td>{_e(chain.get('reason', ''))}</td></tr>"
    )


def _plan_part(section: dict[str, Any]) -> str:
    budget = section.get("budget_bytes", 0) / 1e6
    held = section.get("bytes_total", 0) / 1e6
    items = section.get("dataset_len")
    parts = [
        f"<p>Mode <code>{_e(section.get('mode', 'auto'))}</code>; budget {budget:.0f} MB (the "
        f"RAM tier); the chosen cuts hold {held:.3g} MB"
        + (f" for {items} items" if items else "")
        + f". Expected saving per sample from the second epoch on: "
        f"{section.get('saved_ns_per_sample', 0) / 1e6:.3g} ms; storing in the first epoch: "
        f"{section.get('write_ns_per_sample', 0) / 1e6:.3g} ms per sample"
        + (f"; {_e(section['first_epoch'])}" if section.get("first_epoch") else "")
        + ".</p>"
    ]
    head = [
        "chain",
        "source",
        "calls",
        "cut after",
        "MB/sample",
        "traced ms up to the cut",
        "read ms",
        "saved ms/sample",
        "cached",
        "reason",
    ]
    rows = [_chain_row(c) for c in section.get("chains", [])]
    parts.append(_table(head, rows) if rows else "<p>No chain was found.</p>")
    if section.get("note"):
        parts.append(f'<p class="note">{_e(section["note"])}</p>')
    return "".join(parts)


def _run_part(stats: dict[str, Any]) -> str:
    misses = stats.get("misses") or {}
    verify = stats.get("verify") or {}
    lookup = stats.get("lookup") or {}
    rows = [
        ("hits", stats.get("hits", 0)),
        ("hit rate", f"{100 * stats.get('hit_rate', 0.0):.1f} %"),
        *((f"misses: {MISS_REASONS.get(r, r)}", count) for r, count in misses.items()),
        ("values stored", stats.get("stored", 0)),
        ("not stored: budget full", stats.get("not_stored_full", 0)),
        ("not stored: written to before storing", stats.get("not_stored_changed", 0)),
        ("not stored: write queue full", stats.get("not_stored_dropped", 0)),
        ("left for a later epoch: past the storing share", stats.get("not_stored_later", 0)),
        ("evictions", stats.get("evictions", 0)),
        ("corrupt entries removed", stats.get("corrupt", 0)),
        *(
            (
                f"MB in the {tier} tier (of {stats.get('budget_bytes', {}).get(tier, 0) / 1e6:.0f})",
                f"{used / 1e6:.3g}",
            )
            for tier, used in (stats.get("bytes") or {}).items()
        ),
        (
            "verified hits (mismatches)",
            f"{verify.get('checked', 0)} ({verify.get('mismatches', 0)})",
        ),
        (
            "element-wise runs gathered through a table / computed by their calls (mismatches)",
            f"{lookup.get('gathered', 0)} / {lookup.get('computed', 0)} "
            f"({lookup.get('mismatches', 0)})",
        ),
        (
            "ms reading hits / storing values (of which on the loading thread)",
            f"{stats.get('read_ms', 0):.1f} / {stats.get('write_ms', 0):.1f} "
            f"({stats.get('queue_ms', 0):.1f})",
        ),
    ]
    body = [f"<tr><td>{_e(k)}</td><td>{_e(v)}</td></tr>" for k, v in rows]
    parts = ["<p>What the optimized run counted (all processes):</p>", _table(["", ""], body)]
    for detail, count in (stats.get("diverged") or {}).items():
        parts.append(f'<p class="note">computed normally {count}x: {_e(detail)}</p>')
    for problem in stats.get("problems") or []:
        parts.append(f'<p class="note">{_e(problem)}</p>')
    return "".join(parts)


def cache_section_html(section: dict[str, Any], stats: dict[str, Any] | None = None) -> str:
    """The cut per chain with bytes and time per sample, the expected saving and the budget;
    then the run's hits and misses by reason when ``stats`` (``get_stats()["cache"]``) is given."""
    out = _plan_part(section)
    if stats and stats.get("enabled"):
        out += _run_part(stats)
    return out

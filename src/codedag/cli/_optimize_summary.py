"""``codedag optimize``'s summary: the passes' figures, what migrates, the notes and one table or
line per section of the plan."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from codedag.cli.output import stdout_console

if TYPE_CHECKING:
    from codedag.plan import MigrationPlan


def passes_line(stats: dict[str, Any]) -> str:
    """The passes' figures on one line, each with its unit: nodes, clusters, load balance as the
    mean partition load in % of the largest, the objective J (a weighted score, no unit) and the
    edges cut."""
    co, it = stats["coarsening"], stats["iteration"]
    before = 100 * stats["partitioning"].get("load_balance", 1.0)
    after = 100 * it.get("load_balance_after", 1.0)
    return (
        f"coarsened {co.get('original_nodes', 0)} -> {co.get('coarse_nodes', 0)} nodes "
        f"({co.get('clusters', 0)} clusters); k={stats['partitioning'].get('k', 0)}, "
        f"load balance (mean/max load) {before:.1f} % -> {after:.1f} %, objective J (score) "
        f"{it.get('objective_before', 0):.4f} -> {it.get('objective_after', 0):.4f}, "
        f"edge cut {stats['edge_cut']['optimized']} edges"
    )


def print_summary(
    args: argparse.Namespace,
    stats: dict[str, Any],
    plan: MigrationPlan,
    tuned: Any | None,
    kept: str | None,
) -> None:
    """The passes' figures, what migrates, the notes, the explain tables and one line per
    section of the plan; with ``tuned`` (the loader section just measured) its table under
    ``--explain`` and what the migrator keeps."""
    from codedag.cli.plan import print_sections
    from codedag.optimize.explain import plan_table, section_lines
    from codedag.util.text import listing, printable

    out = stdout_console()
    if tuned is not None and args.explain:
        from codedag.cli.tune import print_section

        print_section(tuned, out)
    out.print(passes_line(stats), markup=False)
    placed = sorted({printable(c.function, 80) for c in plan.calls if c.migrate})
    out.print(
        f"{len(plan.context_device_map)} call context(s) migrate"
        + (f" ({listing(placed)}) to {plan.target_device}" if placed else "")
        + f"; files in {printable(args.out)}",
        markup=False,
    )
    for note in plan.notes:
        out.print(f"note: {printable(note)}", markup=False)
    if args.explain:
        out.print(plan_table(plan, limit=None if args.all else 30, show_all=args.all))
    else:
        out.print(plan_table(plan, limit=12, measured_only=True))
    print_sections(plan, out, args.all)
    for line in section_lines(plan):
        out.print(line, markup=False)
    if kept is not None:
        out.print(f"warning: loader: {printable(kept)}", markup=False)

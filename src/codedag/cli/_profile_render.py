"""Rich console output of ``codedag profile``: stats, top ops, diagnosis, scenario comparison."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from rich.console import Console
from rich.table import Table

from codedag.profile.result import ProfileResult


def _ms(seconds: float | None) -> str:
    return "n/a" if seconds is None else f"{seconds * 1e3:.2f}"


def _num(x: float | None, digits: int = 1) -> str:
    return "n/a" if x is None else f"{x:.{digits}f}"


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def stats_table(result: ProfileResult) -> Table:
    """Quick stats: timings with p50/p95 and the per-step counts."""
    f, t, c = result.figures, result.timings, result.config
    cuda = c.device == "cuda"
    title = f"{c.scenario} on {c.device}" + (
        f" ({c.extra['target']})" if "target" in c.extra else ""
    )
    table = Table(title=title, show_header=True, title_justify="left")
    table.add_column("figure")
    table.add_column("value", justify="right")
    table.add_column("p50", justify="right")
    table.add_column("p95", justify="right")
    step_label = "step time, CUDA events (ms)" if cuda else "step time (ms)"
    table.add_row(
        step_label, _ms(f.avg_step_time_s), _ms(t["p50_step_time_s"]), _ms(t["p95_step_time_s"])
    )
    table.add_row(
        "data wait, next(iterator) (ms)",
        _ms(f.avg_dataloader_wait_s),
        _ms(t["p50_dataloader_wait_s"]),
        _ms(t["p95_dataloader_wait_s"]),
    )
    table.add_row("wall time per step (ms)", _ms(t["wall_time_per_step_s"]), "", "")
    table.add_row("data wait share of wall time", _pct(f.data_wait_share), "", "")
    if cuda:
        table.add_row("GPU idle between steps", _pct(f.device_idle_share), "", "")
        table.add_row("GPU busy (kernel time / step)", _pct(f.device_busy_share), "", "")
        table.add_row("kernels per step", _num(f.kernels_per_step), "", "")
        table.add_row("mean kernel time (us)", _num(f.mean_kernel_time_us), "", "")
    table.add_row("operator calls per step", _num(f.ops_per_step), "", "")
    table.add_row("mean op time (us)", _num(f.mean_op_time_us), "", "")
    sync_label = "blocking syncs per step" if cuda else "host reads of tensor values per step"
    table.add_row(sync_label, _num(f.syncs_per_step), "", "")
    if cuda:
        table.add_row("host time blocked in syncs", _pct(f.sync_wait_share), "", "")
    table.add_row("allocations per step", _num(f.allocations_per_step, 0), "", "")
    table.add_row("MiB allocated per step", _num(f.allocated_bytes_per_step / 2**20), "", "")
    if cuda:
        table.add_row("cudaMalloc segments per step", _num(f.cuda_mallocs_per_step), "", "")
    table.caption = "timings from unprofiled steps; counts from the profiled window"
    return table


def top_ops_table(result: ProfileResult) -> Table:
    """Top ops by self device time (CUDA) or self CPU time, per step."""
    which = "self CUDA" if result.config.device == "cuda" else "self CPU"
    table = Table(title=f"top ops by {which} time (per step)", title_justify="left")
    table.add_column("op", overflow="fold", max_width=60)
    table.add_column("calls", justify="right")
    table.add_column(f"{which} (ms)", justify="right")
    table.add_column("share", justify="right")
    for op in result.top_ops:
        table.add_row(
            op.name,
            f"{op.calls_per_step:.1f}",
            f"{op.self_time_per_step_s * 1e3:.3f}",
            f"{op.self_time_pct:.1f}%",
        )
    return table


def print_diagnosis(console: Console, result: ProfileResult) -> None:
    """The verdict, its evidence and next steps, then the other findings that fire or matter."""
    d = result.diagnosis
    primary = d.primary
    console.print(f"[bold]diagnosis: {d.verdict}[/bold]")
    for line in primary.evidence:
        console.print(f"  evidence: {line}", soft_wrap=True)
    for line in primary.next_steps:
        console.print(f"  next: {line}", soft_wrap=True)
    for finding in d.findings:
        if finding.bound in (d.verdict, "compute-bound") or not finding.evidence:
            continue
        if finding.fires:
            console.print(f"  also {finding.bound}: {'; '.join(finding.evidence)}", soft_wrap=True)
            console.print(f"    next: {finding.next_steps[0]}", soft_wrap=True)
        elif finding.bound == "sync-bound" and result.figures.syncs_per_step > 0:
            console.print(f"  note: {finding.evidence[0]}", soft_wrap=True)
            console.print(f"    next: {finding.next_steps[0]}", soft_wrap=True)


def print_result(console: Console, result: ProfileResult) -> None:
    """Everything about one run."""
    console.print(stats_table(result))
    console.print(top_ops_table(result))
    print_diagnosis(console, result)
    console.print(
        f"trace: {result.trace_path}  (open in https://ui.perfetto.dev or chrome://tracing)"
    )


def comparison_table(results: Sequence[ProfileResult]) -> Table:
    """One row per scenario: the figures that tell them apart, and the verdicts."""
    cuda = results[0].config.device == "cuda"
    table = Table(title="scenarios side by side", title_justify="left")
    columns: list[tuple[str, Any]] = [
        ("scenario", lambda r: r.config.scenario),
        ("step ms", lambda r: _ms(r.figures.avg_step_time_s)),
        ("wait ms", lambda r: _ms(r.figures.avg_dataloader_wait_s)),
        ("wait share", lambda r: _pct(r.figures.data_wait_share)),
        (
            "kernels/step" if cuda else "ops/step",
            lambda r: _num(r.figures.kernels_per_step if cuda else r.figures.ops_per_step, 0),
        ),
        ("syncs/step", lambda r: _num(r.figures.syncs_per_step)),
        ("allocs/step", lambda r: _num(r.figures.allocations_per_step, 0)),
        ("verdict", lambda r: r.diagnosis.verdict),
    ]
    for name, _ in columns:
        table.add_column(name, justify="left" if name in ("scenario", "verdict") else "right")
    for r in results:
        table.add_row(*[get(r) for _, get in columns])
    return table


def print_comparison(console: Console, results: Sequence[ProfileResult]) -> None:
    console.print(comparison_table(results))

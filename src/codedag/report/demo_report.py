"""The demo's HTML report: summary, epochs, equivalence, plan, prefix cache, chain view,
partitioned DAG, plots, environment."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from codedag.optimize.export import PARTITION_COLORS
from codedag.report.chain_view import ChainView
from codedag.report.html import ReportContent, write_html_report

# The facts of the monitor's environment record a reader of the report needs.
ENVIRONMENT_KEYS = ("host", "platform", "python", "codedag", "torch", "cuda", "cpu_count")


def write_demo_report(
    path: Path,
    demo: Any,
    plan: dict[str, Any],
    dag_svg: str | None,
    dag_dot: str | None,
    plots: list[Path],
    environment: Mapping[str, Any],
    cache_stats: dict[str, Any] | None = None,
    chain: ChainView | None = None,
    tables_stats: dict[str, Any] | None = None,
) -> Path:
    """Render ``report.html`` for a :class:`~codedag.experiments.demo_settings.DemoResult`
    (``cache_stats``, ``tables_stats``: the optimized run's ``get_stats()["cache"]`` and
    ``["tables"]``)."""
    columns, rows = _mode_table(demo)
    epoch_columns, epoch_rows = _epoch_table(demo)
    notes = _notes(demo)
    return write_html_report(
        path,
        ReportContent(
            title=f"codedag demo ({demo.settings.task})",
            subtitle=f"{demo.settings.batches} batches of {demo.settings.batch_size} "
            f"per mode on {demo.device}",
            summary_columns=columns,
            summary_rows=rows,
            equivalence=demo.equivalence.to_dict(),
            plan=plan,
            dag_svg=dag_svg,
            dag_dot=None if dag_svg else dag_dot,
            partition_colors={
                f"partition {i}": color for i, color in enumerate(PARTITION_COLORS[:3])
            },
            plots=plots,
            environment={k: environment.get(k) for k in ENVIRONMENT_KEYS}
            | {"device used": demo.device},
            notes=notes,
            loader=None if demo.loader is None else demo.loader.model_dump(mode="json"),
            epoch_columns=epoch_columns,
            epoch_rows=epoch_rows,
            cache=plan.get("cache"),
            cache_stats=cache_stats,
            tables=plan.get("tables"),
            tables_stats=tables_stats,
            chain=chain,
        ),
    )


def _mode_table(demo: Any) -> tuple[list[str], list[list[Any]]]:
    """One row per mode: steady-state step times with their spread, data wait, throughput."""
    columns = [
        "mode",
        "batches",
        "mean step s ± std",
        "batch p50 s",
        "batch p95 s",
        "data-wait share",
        "samples/s",
        "final loss",
    ]
    rows = [
        [
            m.mode,
            f"{m.batches} ({m.warmup_batches} warm-up)" if m.warmup_batches else m.batches,
            f"{m.mean_step_s:.4f} ± {m.step_std_s:.4f}",
            m.p50_batch_s,
            m.p95_batch_s,
            f"{100 * m.data_wait_share:.1f} %",
            m.throughput_samples_s,
            "n/a" if m.final_loss is None else m.final_loss,
        ]
        for m in demo.modes
    ]
    return columns, rows


def _epoch_table(demo: Any) -> tuple[list[str], list[list[Any]]]:
    """One row per mode and epoch, each against the baseline's same epoch."""
    epoch_columns = ["mode", "epoch", "batches", "samples", "s", "samples/s", "data-wait share",
                     "vs baseline"]  # fmt: skip
    base = {e.epoch: e.samples_per_s for e in demo.epochs if e.mode == "baseline"}
    epoch_rows = [
        [
            e.mode,
            e.epoch,
            e.batches,
            e.samples,
            e.seconds,
            e.samples_per_s,
            f"{100 * e.data_wait_s / e.seconds:.1f} %" if e.seconds else "-",
            f"{e.samples_per_s / base[e.epoch]:.2f}x" if base.get(e.epoch) else "-",
        ]
        for e in demo.epochs
    ]
    return epoch_columns, epoch_rows


def _notes(demo: Any) -> list[str]:
    """The verdict, what the figures leave out, the speedup with its interval, migrations."""
    notes = [demo.verdict] if demo.verdict else []
    warm = sorted({m.warmup_batches for m in demo.modes})
    if any(warm):
        notes.append(
            f"Steady state: the first {', '.join(map(str, warm))} batch(es) of each mode (warm-up: "
            "start-up of workers, caches and kernels) are left out of every figure."
        )
    if demo.speedup is not None:
        ratio = f"{demo.speedup:.3f}x" + (
            f" ± {demo.speedup_spread:.3f} (95 % interval)"
            if demo.speedup_spread is not None
            else ""
        )
        judged = {"no difference": ": no difference, the ratio lies within its spread"}.get(
            demo.difference or "", ""
        )
        notes.append(
            f"Median step time, data wait included, baseline / optimization: {ratio}{judged}"
        )
    migrated = ", ".join(f"{n}: {c}" for n, c in sorted(demo.migrated_calls.items()) if c)
    notes.append(f"Migrated calls per function: {migrated or 'none'}")
    fell_back = {n: c for n, c in demo.fallbacks.items() if c}
    if fell_back:
        notes.append(
            "Fallbacks to the original function: "
            + ", ".join(
                f"{n}: {c} ({demo.fallback_reasons.get(n, {})})" for n, c in fell_back.items()
            )
        )
    if demo.device == "cpu":
        notes.append(
            "No CUDA device here: calls were measured and placed for torch on the CPU; a GPU "
            "machine measures and places for its GPU."
        )
    return notes

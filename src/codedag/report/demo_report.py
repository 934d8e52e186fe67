"""The demo's HTML report: summary, equivalence, plan, partitioned DAG, plots, environment."""

from __future__ import annotations

import platform
from pathlib import Path
from typing import Any

from codedag.report.html import ReportContent, write_html_report

PARTITION_LEGEND = {"partition 0": "#cfe2f3", "partition 1": "#f4cccc", "partition 2": "#d9ead3"}


def environment_facts(device: str) -> dict[str, Any]:
    """The few facts a reader of the report needs: host, versions, device."""
    import torch

    facts: dict[str, Any] = {
        "host": platform.node(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "device used": device,
        "CUDA": torch.version.cuda or "CPU-only torch build",
    }
    if torch.cuda.is_available():
        facts["GPU"] = torch.cuda.get_device_name(0)
    import os

    facts["CPUs"] = os.cpu_count()
    return facts


def write_demo_report(
    path: Path,
    demo: Any,
    plan: dict[str, Any],
    dag_svg: str | None,
    dag_dot: str | None,
    plots: list[Path],
) -> Path:
    """Render ``report.html`` for a :class:`~codedag.experiments.demo_settings.DemoResult`."""
    columns = [
        "mode",
        "batches",
        "mean batch s",
        "p50 s",
        "p95 s",
        "data-wait share",
        "samples/s",
        "final loss",
    ]
    rows = [
        [
            m.mode,
            m.batches,
            m.mean_batch_s,
            m.p50_batch_s,
            m.p95_batch_s,
            f"{100 * m.data_wait_share:.1f} %",
            m.throughput_samples_s,
            "n/a" if m.final_loss is None else m.final_loss,
        ]
        for m in demo.modes
    ]
    notes = []
    if demo.speedup is not None:
        notes.append(
            f"Speedup of the mean batch time (baseline / optimization): {demo.speedup:.3f}x"
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
            "No CUDA device here: the migrated calls ran through torch on the CPU, which checks "
            "correctness and dispatch, not GPU speed."
        )
    return write_html_report(
        path,
        ReportContent(
            title=f"codedag demo ({demo.settings.get('task')})",
            subtitle=f"{demo.settings.get('batches')} batches of {demo.settings.get('batch_size')} "
            f"per mode on {demo.device}",
            summary_columns=columns,
            summary_rows=rows,
            equivalence=demo.equivalence,
            plan=plan,
            dag_svg=dag_svg,
            dag_dot=None if dag_svg else dag_dot,
            partition_colors=PARTITION_LEGEND,
            plots=plots,
            environment=environment_facts(demo.device),
            notes=notes,
        ),
    )

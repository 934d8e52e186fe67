"""Session analysis: energy against each hyperparameter, and energy against quality (Pareto front).

Only successful experiments are plotted. The energy axis is what was measured: CPU+GPU when both
are available for every experiment, else GPU or CPU alone; when nothing was measured, the plots
use the run time and say so in their titles (a time is never relabelled as energy).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codedag.energy.store import load_session_records
from codedag.errors import SchemaError
from codedag.util.io import atomic_save_figure, atomic_write_json
from codedag.util.text import file_stem

log = logging.getLogger(__name__)


def pareto_front(points: Sequence[tuple[float, float]], maximize: bool = True) -> list[int]:
    """Indices of the points no other point beats: less energy (x) and better quality (y).

    Sorted by energy; O(n log n). Points with equal coordinates are all kept.
    """
    order = sorted(
        range(len(points)),
        key=lambda i: (points[i][0], -points[i][1] if maximize else points[i][1]),
    )
    front: list[int] = []
    best: float | None = None
    for i in order:
        y = points[i][1] if maximize else -points[i][1]
        if best is None or y > best or (front and points[front[-1]] == points[i]):
            front.append(i)
            best = y if best is None else max(best, y)
    return front


def energy_axis(records: Sequence[dict[str, Any]]) -> tuple[str, list[float], str]:
    """(label, values, note) of the quantity to plot as energy for ``records``."""

    def column(key: str) -> list[float | None]:
        return [r.get("energy_metrics", {}).get(key) for r in records]

    cpu, gpu = column("cpu_energy_total_joules"), column("gpu_energy_total_joules")
    if records and all(c is not None for c in cpu) and all(g is not None for g in gpu):
        return "energy CPU+GPU (J)", [c + g for c, g in zip(cpu, gpu)], ""  # type: ignore[operator]
    if records and all(g is not None for g in gpu):
        return "GPU energy (J)", [float(g) for g in gpu], "CPU energy not measured"  # type: ignore[arg-type]
    if records and all(c is not None for c in cpu):
        return "CPU energy (J)", [float(c) for c in cpu], "GPU energy not measured"  # type: ignore[arg-type]
    reasons = {
        r.get("energy_metrics", {}).get("cpu_energy_unavailable_reason") for r in records
    } - {None}
    note = "no energy measured" + (f" ({min(reasons)})" if reasons else "")
    return "run time (s)", [float(r["duration_seconds"]) for r in records], note


def choose_metric(records: Sequence[dict[str, Any]], metric: str | None) -> tuple[str | None, bool]:
    """The quality metric to plot and whether higher is better (losses and errors: lower)."""
    names = sorted({k for r in records for k in r.get("performance_metrics", {})})
    if metric is not None and metric not in names:
        raise SchemaError(f"metric {metric!r} not in this session's metrics {names}")
    if metric is None:
        preferred = [n for n in names if "acc" in n] or names
        metric = preferred[0] if preferred else None
    maximize = metric is None or not any(w in metric for w in ("loss", "err", "perplexity"))
    return metric, maximize


def report(
    session_dir: Path, out_dir: Path | None = None, metric: str | None = None
) -> dict[str, Any]:
    """Plot a session: ``energy_vs_<hyperparameter>.png`` and ``energy_vs_<metric>.png``.

    Returns:
        A summary (files, axis, note, Pareto front experiment ids), also written as report.json.

    Raises:
        SchemaError: no successful experiment in the folder, or an unknown ``metric``.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    session_dir = Path(session_dir)
    records = [r for r in load_session_records(session_dir) if r.get("training_success")]
    if not records:
        raise SchemaError(f"{session_dir} holds no successful experiment to plot")
    out = Path(out_dir) if out_dir is not None else session_dir / "report"
    out.mkdir(parents=True, exist_ok=True)
    label, energy, note = energy_axis(records)
    models = sorted({f"{r['repository']}/{r['model']}" for r in records})
    hyper = sorted({k for r in records for k in r.get("mutated_hyperparameters", [])}) or sorted(
        {k for r in records for k in r.get("hyperparameters", {})}
    )
    axis = _EnergyAxis(label, note, energy)
    files = [_plot_hyperparameter(plt, records, models, axis, name, out) for name in hyper]
    metric_name, maximize = choose_metric(records, metric)
    front_ids: list[str] = []
    if metric_name is not None:
        path, front_ids = _plot_pareto(plt, records, axis, metric_name, maximize, out)
        files.append(path)
    summary = {
        "session": str(session_dir),
        "experiments_plotted": len(records),
        "energy_axis": label,
        "note": note,
        "metric": metric_name,
        "metric_higher_is_better": maximize,
        "pareto_front": front_ids,
        "files": files,
    }
    atomic_write_json(out / "report.json", summary)
    return summary


@dataclass(frozen=True)
class _EnergyAxis:
    """The energy axis of every plot: its label, a note on its source, one value per record."""

    label: str
    note: str
    values: list[float]

    def title(self, text: str) -> str:
        return text + (f"\n{self.note}" if self.note else "")


def _plot_hyperparameter(
    plt: Any,
    records: list[dict[str, Any]],
    models: list[str],
    axis: _EnergyAxis,
    name: str,
    out: Path,
) -> str:
    """``energy_vs_<name>.png``: energy against one hyperparameter, one series per model."""
    fig, ax = plt.subplots(figsize=(6, 4))
    for model in models:
        xs, ys = [], []
        for r, e in zip(records, axis.values):
            if f"{r['repository']}/{r['model']}" == model and name in r["hyperparameters"]:
                xs.append(r["hyperparameters"][name])
                ys.append(e)
        ax.scatter(xs, ys, label=model)
    values = [r["hyperparameters"][name] for r in records if name in r["hyperparameters"]]
    if values and min(values) > 0 and max(values) / min(values) > 20:
        ax.set_xscale("log")
    ax.set_xlabel(name)
    ax.set_ylabel(axis.label)
    ax.set_title(axis.title(f"{axis.label} vs {name}"), fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = atomic_save_figure(fig, out / f"energy_vs_{file_stem(name)}.png", dpi=100)
    plt.close(fig)
    return str(path)


def _plot_pareto(
    plt: Any,
    records: list[dict[str, Any]],
    axis: _EnergyAxis,
    metric: str,
    maximize: bool,
    out: Path,
) -> tuple[str, list[str]]:
    """``energy_vs_<metric>.png`` with the Pareto front drawn; the file and the front's ids."""
    pairs = [
        (e, r["performance_metrics"][metric], r["experiment_id"])
        for r, e in zip(records, axis.values)
        if metric in r.get("performance_metrics", {})
    ]
    front = pareto_front([(e, p) for e, p, _ in pairs], maximize)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.scatter([e for e, _, _ in pairs], [p for _, p, _ in pairs], label="experiments")
    ax.plot(
        [pairs[i][0] for i in front],
        [pairs[i][1] for i in front],
        "r-o",
        drawstyle="steps-post",
        label="Pareto front",
    )
    ax.set_xlabel(axis.label)
    ax.set_ylabel(metric + (" (higher is better)" if maximize else " (lower is better)"))
    ax.set_title(axis.title(f"{metric} vs {axis.label}"), fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    path = atomic_save_figure(fig, out / f"energy_vs_{file_stem(metric)}.png", dpi=100)
    plt.close(fig)
    return str(path), [pairs[i][2] for i in front]

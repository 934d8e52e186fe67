"""PNG figures comparing the modes of a results file (baseline vs optimization overlaid).

Figures (one file each, in ``out_dir``):

- ``batch_time.png``: batch time and data wait per step (ms);
- ``cpu.png``: container/host CPU and process-tree CPU (% of the job's CPUs) over time;
- ``memory.png``: memory use (% of the limit) and process-tree RSS (MB) over time;
- ``gpu_util.png``, ``gpu_memory.png``: per GPU over time (a note when no GPU was sampled);
- ``loss.png``, ``accuracy.png``: per logged step;
- ``summary.png``: mean step time split into data wait and batch time, throughput, speedup.

Drawn on ``matplotlib.figure.Figure`` with the Agg canvas: no pyplot, no global backend change.
Long series are bucket means (the stride is in the title).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from codedag.monitor.compare import compare_modes
from codedag.monitor.model import ModeResults, RunResults, Series
from codedag.monitor.results import load_results

log = logging.getLogger(__name__)

_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"]
_DPI = 110


def _figure(rows: int = 1, cols: int = 1, height: float = 4.0) -> tuple[Any, Any]:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(10, height * rows), dpi=_DPI, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(rows, cols, squeeze=False)
    return fig, axes


def _save(fig: object, path: Path) -> Path:
    from codedag.util.io import atomic_save_figure

    return atomic_save_figure(fig, path)


def _empty(ax: Any, text: str) -> None:
    ax.text(
        0.5, 0.5, text, ha="center", va="center", transform=ax.transAxes, color="0.4", wrap=True
    )
    ax.set_xticks([])
    ax.set_yticks([])


def _stride_note(mode: ModeResults, key: str) -> str:
    stride = mode.stride(key)
    return f" [means of {stride}]" if stride > 1 else ""


def _plot_steps(
    ax: Any,
    modes: dict[str, ModeResults],
    series: Callable[[ModeResults], Series],
    scale: float,
    title: str,
    unit: str,
) -> None:
    drawn = False
    notes = set()
    for i, (name, mode) in enumerate(modes.items()):
        points = series(mode)
        if not points:
            continue
        xs = [p[0] for p in points]
        ys = [p[1] * scale for p in points]
        ax.plot(xs, ys, color=_COLORS[i % len(_COLORS)], lw=1.0, alpha=0.85, label=name)
        notes.add(_stride_note(mode, "batch_times"))
        drawn = True
    heading = title + "".join(sorted(notes))
    empty = f"no {title.lower()} recorded"
    if _labelled(ax, heading, drawn, empty, "batch (within mode)", unit, loc="upper right"):
        ax.ticklabel_format(axis="y", useOffset=False)
        ax.set_ylim(bottom=0)


def _labelled(
    ax: Any, title: str, drawn: bool, empty: str, xlabel: str, unit: str, **legend: Any
) -> bool:
    """Title the axes; then label them, grid and legend them if anything was drawn, else say
    ``empty`` on them. Whether anything was drawn."""
    ax.set_title(title)
    if not drawn:
        _empty(ax, empty)
        return False
    ax.set_xlabel(xlabel)
    ax.set_ylabel(unit)
    ax.grid(alpha=0.3)
    ax.legend(**legend)
    return True


def _resource_series(mode: ModeResults, key: str) -> dict[str, Series]:
    return {
        f"GPU {device}" if device else "": points
        for device, points in sorted(mode.resource_usage.series(key).items())
        if points
    }


def _plot_resource(
    ax: Any,
    modes: dict[str, ModeResults],
    keys: list[tuple[str, str]],
    title: str,
    unit: str,
    empty: str,
) -> None:
    drawn = False
    for i, (name, mode) in enumerate(modes.items()):
        t0 = mode.started_at
        for k, (key, label) in enumerate(keys):
            for d, (device, points) in enumerate(_resource_series(mode, key).items()):
                style = ("-", "--", ":", "-.")[(k + d) % 4]  # GPUs of one mode: one color each
                origin = t0 if t0 is not None else points[0][0]
                xs = [p[0] - origin for p in points]
                ys = [p[1] for p in points]
                parts = [name, device, label]
                ax.plot(xs, ys, style, color=_COLORS[i % len(_COLORS)], lw=1.2,
                        label=": ".join(p for p in parts if p))  # fmt: skip
                drawn = True
    if not _labelled(
        ax, title, drawn, empty, "time since mode start (s)", unit, loc="best", fontsize="small"
    ):
        return
    ax.ticklabel_format(axis="y", useOffset=False, style="plain")
    if unit.startswith("%"):
        ax.set_ylim(0, ax.get_ylim()[1] * 1.1 or 1.0)  # headroom: flat lines stay visible


def _plot_metric(ax: Any, modes: dict[str, ModeResults], key: str, title: str, unit: str) -> None:
    drawn = False
    for i, (name, mode) in enumerate(modes.items()):
        points = mode.metrics.losses if key == "losses" else mode.metrics.accuracies
        if not points:
            continue
        stride = mode.stride(key)
        xs = [j * stride for j in range(len(points))]
        ax.plot(xs, [p[2] for p in points], color=_COLORS[i % len(_COLORS)], lw=1.2, label=name)
        drawn = True
    if _labelled(ax, title, drawn, f"no {key} logged", "logged step", unit, loc="best"):
        ax.ticklabel_format(axis="y", useOffset=False)


def _gpu_reason(results: RunResults) -> str:
    reason = results.environment.gpu_reason
    return "no GPU samples" + (f": {reason}" if reason else "")


def _plot_summary(fig: Any, axes: Any, results: RunResults) -> None:
    rows = compare_modes(results)
    names = [r["mode"] for r in rows]
    colors = [_COLORS[i % len(_COLORS)] for i in range(len(rows))]
    ax_time, ax_tp, ax_speed = axes[0]
    wait = [1e3 * (r["data_wait_mean_s"] or 0.0) for r in rows]
    batch = [1e3 * (r["batch_mean_s"] or 0.0) for r in rows]
    ax_time.bar(names, wait, color="0.75", label="data wait")
    ax_time.bar(names, batch, bottom=wait, color=colors, label="batch (compute)")
    for x, (w, b) in enumerate(zip(wait, batch)):
        ax_time.annotate(f"{w + b:.1f}", (x, w + b), ha="center", va="bottom", fontsize="small")
    ax_time.set_title("mean step time")
    ax_time.set_ylabel("ms per step")
    ax_time.legend(loc="best", fontsize="small")
    tp = [r["batches_per_s"] or 0.0 for r in rows]
    ax_tp.bar(names, tp, color=colors)
    ax_tp.set_title("throughput")
    ax_tp.set_ylabel("batches / s")
    speed = [r["speedup"] or 0.0 for r in rows]
    ax_speed.bar(names, speed, color=colors)
    ax_speed.axhline(1.0, color="0.3", lw=0.8, ls="--")
    for x, v in enumerate(speed):
        ax_speed.annotate(f"{v:.2f}x", (x, v), ha="center", va="bottom", fontsize="small")
    base = next((r["mode"] for r in rows if r["is_baseline"]), "?")
    ax_speed.set_title(f"speedup vs {base} (step time)")
    ax_speed.set_ylabel("x")
    for ax in axes[0]:
        ax.grid(axis="y", alpha=0.3)
        ax.tick_params(axis="x", labelrotation=15)
    fig.suptitle(f"{results.experiment_name}: summary")


def plot_results(results: RunResults | Mapping[str, Any], out_dir: str | Path) -> list[Path]:
    """Render every figure for the results (the model or its JSON dict); returns the PNG paths
    written.

    Raises:
        SchemaError: a dict that is not valid results.
    """
    out = Path(out_dir)
    results = load_results(results)
    modes = results.modes
    name = results.experiment_name
    written: list[Path] = []

    def emit(filename: str, rows: int, draw: Callable[[Any, Any], None], cols: int = 1) -> None:
        fig, axes = _figure(rows, cols, height=3.6 if rows > 1 else 4.2)
        draw(fig, axes)
        written.append(_save(fig, out / filename))

    def batch(fig: Any, axes: Any) -> None:
        _plot_steps(axes[0][0], modes, lambda m: m.batch_times, 1e3, "Batch time", "ms")
        _plot_steps(axes[1][0], modes, lambda m: m.data_wait_times, 1e3, "Data wait", "ms")
        fig.suptitle(f"{name}: batch time and data wait per step")

    def cpu(fig: Any, axes: Any) -> None:
        keys = [("cpu_usage", "container/host"), ("process_cpu_usage", "process tree")]
        _plot_resource(axes[0][0], modes, keys, f"{name}: CPU use", "% of CPUs", "no CPU samples")

    def memory(fig: Any, axes: Any) -> None:
        _plot_resource(axes[0][0], modes, [("memory_usage", "")], "Memory use", "% of limit (host memory if none)",
                       "no memory samples")  # fmt: skip
        _plot_resource(axes[1][0], modes, [("process_memory_mb", "")], "Process-tree RSS", "MB",
                       "no process samples")  # fmt: skip
        fig.suptitle(f"{name}: memory")

    def gpu_util(fig: Any, axes: Any) -> None:
        _plot_resource(axes[0][0], modes, [("gpu_usage", "")], f"{name}: GPU utilization",
                       "%", _gpu_reason(results))  # fmt: skip

    def gpu_mem(fig: Any, axes: Any) -> None:
        _plot_resource(axes[0][0], modes, [("gpu_memory", "")], f"{name}: GPU memory used",
                       "MB", _gpu_reason(results))  # fmt: skip

    def loss(fig: Any, axes: Any) -> None:
        _plot_metric(axes[0][0], modes, "losses", f"{name}: training loss", "loss")

    def acc(fig: Any, axes: Any) -> None:
        _plot_metric(axes[0][0], modes, "accuracies", f"{name}: accuracy", "accuracy")

    emit("batch_time.png", 2, batch)
    emit("cpu.png", 1, cpu)
    emit("memory.png", 2, memory)
    emit("gpu_util.png", 1, gpu_util)
    emit("gpu_memory.png", 1, gpu_mem)
    emit("loss.png", 1, loss)
    emit("accuracy.png", 1, acc)
    emit("summary.png", 1, lambda fig, axes: _plot_summary(fig, axes, results), cols=3)
    log.info("wrote %d figures to %s", len(written), out)
    return written

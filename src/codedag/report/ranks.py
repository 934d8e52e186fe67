"""A multi-rank run (torchrun, SLURM, MPI) read as one: per-rank figures and the aggregate.

Under a distributed launcher every rank's ``ExperimentMonitor`` writes its own folder
(``<name>_rank<R>_<time>/results.json``) and records its rank, the world size and the launch's
identifiers. This module finds a launch's other ranks next to one of them, lines the ranks up, and
sums them per mode:

- ``samples_per_s`` and ``batches_per_s``: summed over the ranks (the job's throughput);
- data wait: per rank (``data_wait_share_pct_by_rank``), and their mean;
- ``slowest_rank``: the rank with the longest mean step time (data wait + batch), which the
  synchronous ranks of DDP wait for, with ``imbalance`` = slowest / fastest mean step time;
- ``speedup``: this mode's summed samples/s (batches/s where samples were not counted) over the
  reference mode's.
"""

from __future__ import annotations

import glob
import logging
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codedag.monitor.compare import compare_modes, pick_baseline
from codedag.monitor.model import RunResults
from codedag.monitor.results import load_results, merge_results
from codedag.util.io import atomic_save_figure

log = logging.getLogger(__name__)

MAX_LAUNCH_GAP_S = 900.0  # ranks of one launch start their monitors within this many seconds
_COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2"]


def rank_of(results: RunResults) -> tuple[int, int]:
    """``(rank, world size)`` a results file was written with; ``(0, 1)`` for one process."""
    return results.environment.rank, max(1, results.environment.world_size)


def _launch_ids(results: RunResults) -> dict[str, str]:
    launch = results.environment.launch
    return dict(launch.ids) if launch is not None else {}


def same_launch(a: RunResults, b: RunResults) -> bool:
    """Whether two ranks' results belong to one launch (name, world size, launcher ids, time)."""
    if a.experiment_name != b.experiment_name:
        return False
    if rank_of(a)[1] != rank_of(b)[1]:
        return False
    ids_a, ids_b = _launch_ids(a), _launch_ids(b)
    if any(ids_a[k] != ids_b[k] for k in ids_a.keys() & ids_b.keys()):
        return False
    return abs(a.timestamp - b.timestamp) <= MAX_LAUNCH_GAP_S


def results_file(path: Path) -> Path:
    """``results.json`` for a file, a run folder, or a folder of run folders (its newest run).

    Raises:
        SchemaError: a folder with no results.json in it or in its run folders.
    """
    if not path.is_dir():
        return path
    if (path / "results.json").exists():
        return path / "results.json"
    runs = [p for p in path.glob("*/results.json") if p.is_file()]
    if not runs:
        from codedag.errors import SchemaError

        raise SchemaError(f"{path}: no results.json in it or in its run folders")
    return max(runs, key=lambda p: (p.stat().st_mtime, str(p)))


def find_other_ranks(path: Path, results: RunResults) -> dict[int, Path]:
    """``results.json`` of the other ranks of ``path``'s launch, in the folders next to it.

    For each missing rank the candidate closest in time wins (a folder that holds several runs
    of one experiment has one candidate per run and rank).
    """
    rank, world = rank_of(results)
    if world <= 1:
        return {}
    stamp = results.timestamp
    found: dict[int, tuple[float, Path]] = {}
    here = path.resolve()
    # ExperimentMonitor names rank folders <name>_rank<R>_<time>: look at that name's only
    named = re.fullmatch(rf"(.+)_rank{rank}_[^/]+", path.parent.name)
    pattern = f"{glob.escape(named.group(1))}_rank*_*/results.json" if named else "*/results.json"
    for candidate in sorted(path.parent.parent.glob(pattern)):
        if candidate.resolve() == here:
            continue
        try:
            other = load_results(candidate)
        except Exception as error:  # a broken neighbour must not break this report
            log.debug("skipping %s: %s", candidate, error)
            continue
        other_rank = rank_of(other)[0]
        if other_rank == rank or not same_launch(results, other):
            continue
        gap = abs(other.timestamp - stamp)
        if other_rank not in found or gap < found[other_rank][0]:
            found[other_rank] = (gap, candidate)
    return {r: p for r, (_, p) in sorted(found.items())}


@dataclass
class RankedRun:
    """The results of every rank (modes of several files of one rank merged)."""

    ranks: dict[int, RunResults]
    paths: dict[int, list[Path]] = field(default_factory=dict)

    @property
    def world_size(self) -> int:
        return len(self.ranks)

    @property
    def experiment_name(self) -> str:
        names = [r.experiment_name for r in self.ranks.values()]
        unique = list(dict.fromkeys(names))
        return unique[0] if len(unique) == 1 else " + ".join(unique)


def collect_ranks(
    paths: Sequence[Path],
    loaded: Sequence[RunResults],
    load: Callable[[Path], RunResults] = load_results,
) -> RankedRun | None:
    """Line up the ranks of the given results (None when every file is from one process).

    The ranks of a launch that were not given are looked up next to the given ones and read with
    ``load``.
    """
    if all(rank_of(r)[1] <= 1 for r in loaded):
        return None
    files: list[tuple[Path, RunResults]] = list(zip(paths, loaded))
    given = {p.resolve() for p in paths}
    for path, results in list(files):
        for other in find_other_ranks(path, results).values():
            if other.resolve() not in given:
                given.add(other.resolve())
                files.append((other, load(other)))
    by_rank: dict[int, list[tuple[Path, RunResults]]] = {}
    for path, results in files:
        by_rank.setdefault(rank_of(results)[0], []).append((path, results))
    ranks, where = {}, {}
    for rank in sorted(by_rank):
        entries = by_rank[rank]
        ranks[rank] = merge_results([r for _, r in entries])
        where[rank] = [p for p, _ in entries]
    worlds = {rank_of(r)[1] for r in loaded if rank_of(r)[1] > 1}
    missing = sorted(set(range(max(worlds))) - set(ranks)) if worlds else []
    if missing:
        log.warning("results of rank(s) %s not found: the aggregate covers the others", missing)
    return RankedRun(ranks, where)


def _sum(values: list[Any]) -> Any:
    """The sum when every value is a number (ints stay ints), else None."""
    numbers = [v for v in values if isinstance(v, int | float)]
    return sum(numbers) if numbers and len(numbers) == len(values) else None


def _mean(values: list[Any]) -> float | None:
    numbers = [v for v in values if isinstance(v, int | float)]
    return sum(numbers) / len(numbers) if numbers else None


def rank_rows(run: RankedRun, baseline: str | None = None) -> list[dict[str, Any]]:
    """compare_modes' rows of every rank, with a ``rank`` key, mode by mode."""
    rows = []
    for rank, results in run.ranks.items():
        ref = baseline if baseline in results.modes else None
        for row in compare_modes(results, ref):
            rows.append({"rank": rank, **row})
    return rows


def aggregate_rows(rows: list[dict[str, Any]], baseline: str | None = None) -> list[dict[str, Any]]:
    """One row per mode over its ranks (see the module's docstring for each figure)."""
    modes: dict[str, list[dict[str, Any]]] = {}
    for row in rows:
        modes.setdefault(row["mode"], []).append(row)
    out = []
    for mode, ranks in modes.items():
        steps = {r["rank"]: r["step_mean_s"] for r in ranks if r["step_mean_s"] is not None}
        slowest = max(steps, key=lambda k: steps[k]) if steps else None
        fastest = min(steps.values()) if steps else None
        statuses = [r["status"] for r in ranks]
        out.append(
            {
                "mode": mode,
                "ranks": [r["rank"] for r in ranks],
                "status": next((s for s in statuses if s != "completed"), "completed"),
                "num_batches": _sum([r["num_batches"] for r in ranks]),
                "total_time_s": max((r["total_time_s"] or 0.0) for r in ranks),
                "batch_mean_s": _mean([r["batch_mean_s"] for r in ranks]),
                "batch_p95_s": max((r["batch_p95_s"] or 0.0) for r in ranks),
                "data_wait_share_pct": _mean([r["data_wait_share_pct"] for r in ranks]),
                "data_wait_share_pct_by_rank": {r["rank"]: r["data_wait_share_pct"] for r in ranks},
                "step_mean_s": steps.get(slowest) if slowest is not None else None,
                "batches_per_s": _sum([r["batches_per_s"] for r in ranks]),
                "samples_per_s": _sum([r["samples_per_s"] for r in ranks]),
                "slowest_rank": slowest,
                "imbalance": (steps[slowest] / fastest)
                if slowest is not None and fastest
                else None,
                "final_loss": _mean([r["final_loss"] for r in ranks]),
                "final_accuracy": _mean([r["final_accuracy"] for r in ranks]),
            }
        )
    ref_name = pick_baseline([r["mode"] for r in out], baseline)
    ref = next((r for r in out if r["mode"] == ref_name), None)
    for row in out:
        row["is_baseline"] = row["mode"] == ref_name
        row["speedup"] = _throughput_ratio(row, ref)
    return out


def _throughput_ratio(row: dict[str, Any], ref: dict[str, Any] | None) -> float | None:
    if ref is None:
        return None
    for key in ("samples_per_s", "batches_per_s"):
        num, den = row.get(key), ref.get(key)
        if isinstance(num, int | float) and isinstance(den, int | float) and den > 0:
            return float(num) / float(den)
    return None


def plot_ranks(run: RankedRun, out_dir: Path, baseline: str | None = None) -> list[Path]:
    """Each rank's usual figures in ``out_dir/rank<R>/`` and ``ranks.png`` with the aggregate."""
    from codedag.monitor.plots import plot_results

    written: list[Path] = []
    for rank, results in run.ranks.items():
        written += plot_results(results, out_dir / f"rank{rank}")
    rows = rank_rows(run, baseline)
    written.append(
        _plot_aggregate(run, rows, aggregate_rows(rows, baseline), out_dir / "ranks.png")
    )
    return written


def _plot_aggregate(
    run: RankedRun, rows: list[dict[str, Any]], totals: list[dict[str, Any]], path: Path
) -> Path:

    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4.4), dpi=110, layout="constrained")
    FigureCanvasAgg(fig)
    axes = fig.subplots(1, 3)
    modes = [t["mode"] for t in totals]
    ranks = sorted(run.ranks)
    width = 0.8 / max(1, len(ranks))
    panels = (
        ("samples_per_s", "throughput per rank", "samples / s", 1.0),
        ("data_wait_share_pct", "data wait per rank", "% of step time", 1.0),
        ("step_mean_s", "mean step time per rank (* slowest)", "ms", 1e3),
    )
    for ax, (key, title, unit, scale) in zip(axes, panels):
        use = key
        if key == "samples_per_s" and any(r["samples_per_s"] is None for r in rows):
            use, unit = "batches_per_s", "batches / s"
        for i, rank in enumerate(ranks):
            values = []
            for mode in modes:
                row = next((r for r in rows if r["rank"] == rank and r["mode"] == mode), None)
                values.append((row.get(use) or 0.0) * scale if row else 0.0)
            xs = [m + (i - (len(ranks) - 1) / 2) * width for m in range(len(modes))]
            ax.bar(xs, values, width, color=_COLORS[i % len(_COLORS)], label=f"rank {rank}")
            if key == "step_mean_s":
                for x, mode, value in zip(xs, modes, values):
                    total = next(t for t in totals if t["mode"] == mode)
                    if total["slowest_rank"] == rank:
                        ax.annotate("*", (x, value), ha="center", va="bottom")
        ax.set_xticks(range(len(modes)), modes)
        ax.set_title(title)
        if key == "samples_per_s":
            summed = ", ".join(f"{t['mode']} {t.get(use) or 0:.1f}" for t in totals)
            ax.set_title(f"throughput per rank\nall ranks: {summed}", fontsize="medium")
        ax.set_ylabel(unit)
        ax.grid(axis="y", alpha=0.3)
        top = ax.get_ylim()[1]
        ax.set_ylim(0, top * 1.25 if top > 0 else 1.0)  # room for the legend above the bars
        ax.legend(loc="upper center", ncol=min(4, len(ranks)), fontsize="small")
    fig.suptitle(f"{run.experiment_name}: {run.world_size} ranks")
    return atomic_save_figure(fig, path)

"""Recompute a run's results from the raw CSV streams next to its JSON.

``ExperimentMonitor`` rewrites ``results.json`` every ``flush_interval_s`` and at the end of a
mode, and appends every raw row to ``<mode>.{batches,resources,metrics}.csv``. A process killed
outright (SIGKILL, the OOM killer, a node failure) leaves a JSON up to one flush interval old,
while the CSV files hold every row up to the last block. :func:`rebuild_results` recomputes each
mode's series and summary from those rows (config, status, environment and probe description are
kept from the JSON), with any downsampling capacity, e.g. for exact figures of a long run.
``codedag report results.json --rebuild`` uses it.
"""

from __future__ import annotations

import csv
import itertools
import logging
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from codedag.errors import SchemaError
from codedag.monitor.metrics import MetricsLogger
from codedag.monitor.resources import ResourceMonitor, sample_from_rows
from codedag.monitor.results import load_results
from codedag.monitor.timer import Timer

log = logging.getLogger(__name__)


def _rows(path: Path | None) -> Iterator[dict[str, str]]:
    if path is None or not path.is_file():
        return
    with open(path, encoding="utf-8", errors="replace", newline="") as fh:
        rows = csv.DictReader(fh)
        while True:
            try:
                row = next(rows)
            except StopIteration:
                return
            except csv.Error as error:  # a NUL byte, an oversized field: the rest is unreadable
                log.warning("%s: stopped reading at line %d: %s", path, rows.line_num, error)
                return
            if None not in row.values():  # skip a line cut short by the kill
                yield row


def _resource_rows(path: Path | None) -> Iterator[tuple[float, str, float]]:
    for row in _rows(path):
        try:
            yield float(row["timestamp"]), row["metric"], float(row["value"])
        except (KeyError, ValueError):
            continue


def _usage_from_rows(rows: Iterator[tuple[float, str, float]], capacity: int) -> ResourceMonitor:
    monitor = ResourceMonitor(1.0, downsample_capacity=capacity)  # record() only: no probe
    for ts, group in itertools.groupby(rows, key=lambda r: r[0]):
        monitor.record(sample_from_rows(ts, [(metric, value) for _, metric, value in group]))
    return monitor


def stream_path(run_dir: Path, name: object, where: str) -> Path | None:
    """The raw CSV a results file names, which must lie inside its run folder.

    Raises:
        SchemaError: the name is not a string, or resolves (``..``, an absolute path, a symbolic
            link) outside ``run_dir``: a results file never makes codedag read other files.
    """
    if name is None or name == "":
        return None
    if not isinstance(name, str):
        raise SchemaError(f"{where}: expected a file name, got {name!r}")
    root = run_dir.resolve()
    candidate = (root / name).resolve()
    if not candidate.is_relative_to(root):
        raise SchemaError(
            f"{where}: {name!r} is outside the run folder {root}; raw streams are only read "
            "from the folder of the results file"
        )
    return candidate


def _rebuild_mode(name: str, mode: dict[str, Any], run_dir: Path, capacity: int) -> dict[str, Any]:
    files = mode.get("files") or {}
    if not isinstance(files, dict):
        raise SchemaError(f"modes.{name}.files: expected an object, got {type(files).__name__}")

    def path(kind: str) -> Path | None:
        return stream_path(run_dir, files.get(kind), f"modes.{name}.files.{kind}")

    batches_csv = path("batches")
    if batches_csv is None or not batches_csv.is_file():
        return mode  # nothing raw to rebuild from: keep what the JSON says
    clock = [0.0]
    timer = Timer("none", clock=lambda: clock[0], downsample_capacity=capacity)
    timer.start()
    last_end = 0.0
    for row in _rows(batches_csv):
        try:
            end, batch_s = float(row["time_s"]), float(row["batch_time_s"])
            wait_s, n = float(row["data_wait_s"]), int(row.get("samples") or 0)
        except (KeyError, ValueError):
            continue
        last_end = end
        timer.add(batch_s, wait_s, time_s=end, n_samples=n)
    clock[0] = max(last_end, float((mode.get("summary") or {}).get("total_time") or 0.0))
    timer.stop()
    metrics = MetricsLogger(downsample_capacity=capacity)
    for row in _rows(path("metrics")):
        try:
            log_fn = metrics.log_loss if row["metric"] == "loss" else metrics.log_accuracy
            log_fn(int(row["epoch"]), int(row["batch"]), float(row["value"]))
        except (KeyError, ValueError):
            continue
    resources = _usage_from_rows(_resource_rows(path("resources")), capacity)
    summary = timer.summary()
    summary.update(metrics.summary())
    res_summary = resources.summary()
    stride = res_summary.pop("max_stride")
    recorded = (mode.get("summary") or {}).get("resources") or {}
    for key in ("interval_s", "errors", "sampler_cpu_s", "sampler_cpu_pct"):
        if key in recorded:
            res_summary[key] = recorded[key]
    summary["resources"] = res_summary
    if "timing" in (mode.get("summary") or {}):
        summary["timing"] = mode["summary"]["timing"]
    batch_times, waits, batch_stride = timer.batch_series()
    return {
        **mode,
        "batch_times": batch_times,
        "data_wait_times": waits,
        "resource_usage": resources.usage(),
        "metrics": metrics.series(),
        "summary": summary,
        "downsampling": {
            "batch_times": batch_stride,
            **metrics.strides(),
            "resource_usage": stride,
        },
        "rebuilt_at": time.time(),
    }


def rebuild_results(
    source: str | os.PathLike[str], downsample_capacity: int = 2048
) -> dict[str, Any]:
    """Results of a run folder (or its results file) recomputed from the raw CSV streams.

    Modes without a batches CSV keep their JSON entry unchanged.

    Raises:
        SchemaError: the results file is missing, malformed or from a newer codedag, or names a
            raw stream outside its run folder.
    """
    path = Path(source)
    if path.is_dir():
        path = path / "results.json"
    results = load_results(path)
    out = {k: v for k, v in results.items() if k != "modes"}
    out["modes"] = {
        name: _rebuild_mode(
            f"results file {path}: modes.{name}", mode, path.parent, downsample_capacity
        )
        for name, mode in results["modes"].items()
    }
    return load_results(out)

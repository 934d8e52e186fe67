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

from codedag.errors import SchemaError
from codedag.monitor.metrics import MetricsLogger
from codedag.monitor.mode import measured_parts
from codedag.monitor.model import ModeResults, RunResults
from codedag.monitor.resources import ResourceMonitor, sample_from_rows
from codedag.monitor.results import load_results
from codedag.monitor.timer import Timer

log = logging.getLogger(__name__)

SAMPLER_FACTS = ("interval_s", "errors", "sampler_cpu_s", "sampler_cpu_pct")


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


def _rebuild_mode(name: str, mode: ModeResults, run_dir: Path, capacity: int) -> ModeResults:
    def path(kind: str) -> Path | None:
        return stream_path(run_dir, mode.files.get(kind), f"modes.{name}.files.{kind}")

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
    clock[0] = max(last_end, float(mode.summary.total_time))
    timer.stop()
    metrics = MetricsLogger(downsample_capacity=capacity)
    for row in _rows(path("metrics")):
        try:
            log_fn = metrics.log_loss if row["metric"] == "loss" else metrics.log_accuracy
            log_fn(int(row["epoch"]), int(row["batch"]), float(row["value"]))
        except (KeyError, ValueError):
            continue
    resources = _usage_from_rows(_resource_rows(path("resources")), capacity)
    parts = measured_parts(timer, metrics, resources)
    rebuilt = ModeResults.model_validate({**mode.to_dict(), **parts, "rebuilt_at": time.time()})
    summary, recorded = rebuilt.summary, mode.summary.resources
    if recorded is not None and summary.resources is not None:
        # what the sampler knew of itself is not in the raw rows
        kept = {key: recorded[key] for key in SAMPLER_FACTS if key in recorded}
        summary.resources = summary.resources.model_copy(update=kept)
    if mode.summary.timing is not None:
        summary.timing = mode.summary.timing
    return rebuilt


def rebuild_results(source: str | os.PathLike[str], downsample_capacity: int = 2048) -> RunResults:
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
    modes = {
        name: _rebuild_mode(
            f"results file {path}: modes.{name}", mode, path.parent, downsample_capacity
        )
        for name, mode in results.modes.items()
    }
    return results.model_copy(update={"modes": modes})

"""Read a saved run back: the recorded batches, resource samples and metrics, in order.

A run folder written by ``ExperimentMonitor`` holds ``results.json`` (downsampled series and
summaries) and, with ``stream_to_disk`` (the default), one CSV per stream and mode with every raw
row. :func:`load_run` reads both; each :class:`RecordedMode` yields the raw rows when the CSV files
are there and falls back to the JSON series otherwise (``raw`` says which).

Uses:

- tests and demos replace the hardware with a :class:`ReplayProbe` that plays recorded resource
  samples into a ``ResourceMonitor``;
- :meth:`ReplayMonitor.rebuild` recomputes a complete results dict from the raw streams, with any
  downsampling capacity: the way to recover a run whose process was killed (SIGKILL, OOM killer)
  between two JSON flushes, since the CSV files were flushed at least as recently.

Example:
    >>> run = ReplayMonitor("results/exp_20260101-120000")        # doctest: +SKIP
    >>> for batch in run.mode("baseline").batches(): ...          # doctest: +SKIP
    >>> results = run.rebuild()                                    # doctest: +SKIP
"""

from __future__ import annotations

import csv
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from codedag.errors import ConfigError, SchemaError
from codedag.monitor.metrics import MetricsLogger
from codedag.monitor.probes import GpuReading, ResourceSample
from codedag.monitor.resources import _GPU_SERIES, _HOST_SERIES, ResourceMonitor
from codedag.monitor.results import load_results
from codedag.monitor.timer import Timer

_HOST_ATTR = {name: attr for attr, name in _HOST_SERIES.items()}
_GPU_ATTR = {name: attr for attr, name in _GPU_SERIES.items()}


@dataclass(frozen=True)
class BatchRecord:
    """One recorded training step (seconds; ``time_s`` is its end since the mode started)."""

    index: int
    time_s: float | None
    batch_time_s: float
    data_wait_s: float | None
    samples: int = 0


@dataclass(frozen=True)
class MetricRecord:
    """One logged loss or accuracy."""

    metric: str  # "loss" or "accuracy"
    epoch: int
    batch: int
    value: float


class RecordedMode:
    """One mode of a saved run.

    Args:
        name: the mode's name.
        data: the mode's entry of the results JSON (upgraded to the current schema).
        run_dir: folder of the results file (where the CSV files are looked for).
    """

    def __init__(self, name: str, data: dict[str, Any], run_dir: Path | None) -> None:
        self.name = name
        self.data = data
        self.run_dir = run_dir

    def _csv(self, kind: str) -> Path | None:
        name = self.data.get("files", {}).get(kind)
        if not name or self.run_dir is None:
            return None
        path = self.run_dir / name
        return path if path.is_file() else None

    @property
    def raw(self) -> bool:
        """True when the raw CSV of batches is there (else the series are the JSON's)."""
        return self._csv("batches") is not None

    def _rows(self, kind: str) -> Iterator[dict[str, str]]:
        path = self._csv(kind)
        if path is None:
            return
        with open(path, encoding="utf-8", newline="") as fh:
            for row in csv.DictReader(fh):
                if None in row.values():  # a line cut short by a killed process
                    continue
                yield row

    def batches(self) -> Iterator[BatchRecord]:
        """Every recorded batch (raw rows, or the JSON's downsampled points)."""
        if self.raw:
            for row in self._rows("batches"):
                try:
                    yield BatchRecord(
                        index=int(row["batch"]),
                        time_s=float(row["time_s"]),
                        batch_time_s=float(row["batch_time_s"]),
                        data_wait_s=float(row["data_wait_s"]),
                        samples=int(row.get("samples") or 0),
                    )
                except (KeyError, ValueError):
                    continue  # a truncated last line
            return
        waits = {int(p[0]): float(p[1]) for p in self.data.get("data_wait_times", [])}
        for point in self.data.get("batch_times", []):
            index = int(point[0])
            yield BatchRecord(index, None, float(point[1]), waits.get(index))

    def resource_samples(self) -> Iterator[ResourceSample]:
        """Every recorded resource sample, GPUs included, in time order."""
        rows: Iterator[tuple[float, str, float]]
        if self._csv("resources") is not None:
            rows = (
                (float(r["timestamp"]), r["metric"], float(r["value"]))
                for r in self._rows("resources")
            )
        else:
            rows = iter(sorted(_json_rows(self.data.get("resource_usage", {}))))
        for ts, group in itertools.groupby(rows, key=lambda r: r[0]):
            yield _sample(ts, [(metric, value) for _, metric, value in group])

    def metrics(self) -> Iterator[MetricRecord]:
        """Every logged loss and accuracy (raw order, or losses then accuracies from JSON)."""
        if self._csv("metrics") is not None:
            for row in self._rows("metrics"):
                try:
                    yield MetricRecord(
                        row["metric"], int(row["epoch"]), int(row["batch"]), float(row["value"])
                    )
                except (KeyError, ValueError):
                    continue
            return
        series = self.data.get("metrics", {})
        for metric, key in (("loss", "losses"), ("accuracy", "accuracies")):
            for epoch, batch, value in series.get(key, []):
                yield MetricRecord(metric, int(epoch), int(batch), float(value))

    def probe(self, *, loop: bool = False) -> ReplayProbe:
        """A probe that plays this mode's resource samples (see :class:`ReplayProbe`)."""
        return ReplayProbe(list(self.resource_samples()), self.data.get("resources", {}), loop=loop)


def _json_rows(usage: dict[str, Any]) -> Iterator[tuple[float, str, float]]:
    for name, series in usage.items():
        if isinstance(series, dict):
            for device, points in series.items():
                for ts, value in points:
                    yield float(ts), f"{name}/{device}", float(value)
        else:
            for ts, value in series:
                yield float(ts), name, float(value)


def _sample(timestamp: float, values: list[tuple[str, float]]) -> ResourceSample:
    host: dict[str, float] = {}
    gpus: dict[int, dict[str, float]] = {}
    for metric, value in values:
        name, _, device = metric.partition("/")
        if device and name in _GPU_ATTR:
            gpus.setdefault(int(device), {})[_GPU_ATTR[name]] = value
        elif name in _HOST_ATTR:
            host[_HOST_ATTR[name]] = value
    readings = [GpuReading(index=i, **fields) for i, fields in sorted(gpus.items())]
    return ResourceSample(timestamp=timestamp, gpus=readings, **host)


class ReplayProbe:
    """A resource probe that returns recorded samples one per call, for tests and demos.

    Args:
        samples: the samples to play, in order.
        describe: what ``describe()`` returns (the recorded probe's description).
        loop: start again after the last sample (else :class:`SchemaError` when exhausted,
            which ``ResourceMonitor`` counts as a failed sample).
    """

    def __init__(
        self,
        samples: list[ResourceSample],
        describe: dict[str, Any] | None = None,
        *,
        loop: bool = False,
    ) -> None:
        self.samples = samples
        self._describe = dict(describe or {})
        self.loop = loop
        self.position = 0

    def sample(self) -> ResourceSample:
        """The next recorded sample."""
        if self.position >= len(self.samples):
            if not self.loop or not self.samples:
                raise SchemaError(f"replay exhausted after {len(self.samples)} recorded samples")
            self.position = 0
        sample = self.samples[self.position]
        self.position += 1
        return sample

    def describe(self) -> dict[str, Any]:
        """The recorded probe's description, marked as a replay."""
        return {**self._describe, "replay": True}


class ReplayMonitor:
    """A saved run, read back for tests, reports and recovery.

    Args:
        source: a run folder (holding ``results.json``), a results file, or a results dict.

    Raises:
        SchemaError: the file is missing, malformed, or from a newer codedag.
    """

    def __init__(self, source: str | os.PathLike[str] | dict[str, Any]) -> None:
        if isinstance(source, dict):
            self.path: Path | None = None
            self.results = load_results(source)
        else:
            path = Path(source)
            if path.is_dir():
                path = path / "results.json"
            self.path = path
            self.results = load_results(path)
        run_dir = self.path.parent if self.path is not None else None
        self.modes = {
            name: RecordedMode(name, data, run_dir) for name, data in self.results["modes"].items()
        }

    @property
    def experiment_name(self) -> str:
        """The recorded experiment's name."""
        return str(self.results["experiment_name"])

    def mode(self, name: str) -> RecordedMode:
        """One recorded mode by name."""
        if name not in self.modes:
            raise ConfigError(f"mode {name!r} not in the recorded run; modes: {list(self.modes)}")
        return self.modes[name]

    def rebuild(self, downsample_capacity: int = 2048) -> dict[str, Any]:
        """Results recomputed from the recorded streams (raw CSV rows where present).

        Summaries (moments, p50/p95, data-wait share, throughput, loss/accuracy, resource means)
        are recomputed; config, status, environment and the probe description are kept.
        """
        out = {k: v for k, v in self.results.items() if k != "modes"}
        out["modes"] = {
            name: self._rebuild_mode(mode, downsample_capacity) for name, mode in self.modes.items()
        }
        return load_results(out)

    @staticmethod
    def _rebuild_mode(mode: RecordedMode, capacity: int) -> dict[str, Any]:
        recorded = mode.data
        clock = [0.0]
        timer = Timer("none", clock=lambda: clock[0], downsample_capacity=capacity)
        timer.start()
        last_end = 0.0
        for record in mode.batches():
            end = record.time_s if record.time_s is not None else last_end + record.batch_time_s
            last_end = end
            timer.add(
                record.batch_time_s, record.data_wait_s or 0.0, time_s=end, n_samples=record.samples
            )
        clock[0] = max(last_end, float(recorded.get("summary", {}).get("total_time") or 0.0))
        timer.stop()
        metrics = MetricsLogger(downsample_capacity=capacity)
        for m in mode.metrics():
            log_fn = metrics.log_loss if m.metric == "loss" else metrics.log_accuracy
            log_fn(m.epoch, m.batch, m.value)
        resources = ResourceMonitor(1.0, probe=ReplayProbe([]), downsample_capacity=capacity)
        for sample in mode.resource_samples():
            resources.record(sample)
        summary = timer.summary()
        summary.update(metrics.summary())
        res_summary = resources.summary()
        stride = res_summary.pop("max_stride")
        recorded_res = recorded.get("summary", {}).get("resources") or {}
        for key in ("interval_s", "errors", "sampler_cpu_s", "sampler_cpu_pct"):
            if key in recorded_res:
                res_summary[key] = recorded_res[key]
        summary["resources"] = res_summary
        if "timing" in recorded.get("summary", {}):
            summary["timing"] = recorded["summary"]["timing"]
        if not mode.raw and recorded.get("downsampling", {}).get("batch_times", 1) > 1:
            summary["note"] = "recomputed from downsampled JSON series (raw CSV not found)"
        batch_times, waits, batch_stride = timer.batch_series()
        return {
            **recorded,
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


def load_run(source: str | os.PathLike[str] | dict[str, Any]) -> ReplayMonitor:
    """Read a saved run (folder, results file or dict); see :class:`ReplayMonitor`."""
    return ReplayMonitor(source)

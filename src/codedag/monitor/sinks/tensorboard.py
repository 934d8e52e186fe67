"""TensorBoard event files: one run per mode, so baseline and optimization overlay.

``tensorboard --logdir <run dir>/tensorboard`` shows each mode as a run: the per-step figures
(``step/...``, a point every ``min_interval_s`` of training, the mean of the steps in between),
the logged losses and accuracies (``train/...``), every resource sample (``system/...``,
``workers/...``, ``gpu<i>/...``, x axis: the sample's index, wall time: when it was taken), the
mode's CPU limit and capacity at step 0, its config as text, and its summary figures
(``summary/...``) at its last step. Names: :mod:`.names`.

Events are written with TensorBoard's own writer (``tensorboard`` package, the
``codedag[tensorboard]`` extra); one event carries all the figures of one point, because each
event costs about 70 µs of CPU to frame (measured).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from codedag.errors import ConfigError
from codedag.monitor.probes import ResourceSample
from codedag.monitor.records import MetricRecord, ModeEnd, ModeInfo, RunInfo, StepRecord
from codedag.monitor.resources import sample_rows
from codedag.monitor.sinks.base import Sink
from codedag.monitor.sinks.names import LIMITS, STEP, TRAIN, resource_name, summary_name
from codedag.monitor.sinks.window import MetricWindow, Point, StepWindow


def _writer_class() -> Any:
    try:
        import tensorboard.compat.proto.event_pb2  # noqa: F401
    except ImportError as error:
        raise ConfigError(
            "the tensorboard sink needs the tensorboard package: pip install 'codedag[tensorboard]'"
        ) from error
    from codedag.monitor.sinks.event_file import EventFile

    return EventFile


class _ModeWriter:
    """One mode's event file, its windows and its resource sample count."""

    def __init__(self, folder: Path, min_interval_s: float, started_at: float) -> None:
        from tensorboard.compat.proto.event_pb2 import Event
        from tensorboard.compat.proto.summary_pb2 import Summary

        self._event, self._summary = Event, Summary
        self.writer = _writer_class()(str(folder))
        self.steps = StepWindow(min_interval_s)
        self.metrics = MetricWindow(min_interval_s)
        self.samples = 0
        self.last_step = 0
        self.started_at = started_at  # epoch seconds of the mode's start: a point's wall time
        self.lock = threading.Lock()

    def point(self, point: Point) -> None:
        """A dashboard point, at its last step and when that step ended."""
        self.scalars(point.step, point.values, self.started_at + point.time_s)

    def scalars(self, step: int, values: dict[str, float], wall_time: float | None = None) -> None:
        """One event holding every ``tag: value``."""
        if not values:
            return
        summary = self._summary(
            value=[self._summary.Value(tag=t, simple_value=v) for t, v in values.items()]
        )
        event = self._event(step=step, wall_time=wall_time or time.time(), summary=summary)
        with self.lock:
            self.writer.add_event(event)

    def text(self, tag: str, text: str) -> None:
        """A text summary (shown in TensorBoard's Text tab)."""
        from tensorboard.plugins.text.summary_v2 import text_pb

        event = self._event(step=0, wall_time=time.time(), summary=text_pb(tag, text))
        with self.lock:
            self.writer.add_event(event)


class TensorBoardSink(Sink):
    """Writes each mode as a TensorBoard run.

    Args:
        log_dir: TensorBoard's log folder; ``None``: ``<run dir>/tensorboard``. A given folder
            gets the run's folder name below it, so runs of several experiments sit side by side.
        min_interval_s: seconds of training between two points of the per-step and logged
            figures (0: a point per step).

    Raises:
        ConfigError: the ``tensorboard`` package is not installed.
    """

    name = "tensorboard"

    def __init__(self, log_dir: str | Path | None = None, min_interval_s: float = 0.1) -> None:
        _writer_class()
        self.log_dir = Path(log_dir) if log_dir is not None else None
        self.min_interval_s = float(min_interval_s)
        self.root: Path | None = None
        self._modes: dict[str, _ModeWriter] = {}

    def open_run(self, run: RunInfo) -> None:
        self.root = (
            run.run_dir / "tensorboard" if self.log_dir is None else self.log_dir / run.run_dir.name
        )

    def start_mode(self, mode: ModeInfo) -> None:
        if self.root is None:
            raise ConfigError("TensorBoardSink.start_mode before open_run")
        writer = _ModeWriter(self.root / mode.file_stem, self.min_interval_s, mode.started_at)
        self._modes[mode.name] = writer
        limits = {
            LIMITS[key].tensorboard: float(value)
            for key, value in (
                ("cpu_limit_cpus", mode.cpu_limit_cpus),
                ("cpu_capacity_cpus", mode.cpu_capacity_cpus),
            )
            if value is not None
        }
        writer.scalars(0, limits, mode.started_at)
        writer.text("config", "```\n" + json.dumps(mode.config, indent=2, default=str) + "\n```")

    def log_steps(self, mode: str, steps: Sequence[StepRecord]) -> None:
        writer = self._modes.get(mode)
        if writer is None or not steps:
            return
        writer.last_step = steps[-1].step
        for point in writer.steps.add(steps):
            self._step_point(writer, point)

    @staticmethod
    def _step_point(writer: _ModeWriter, point: Point) -> None:
        values = {STEP[k].tensorboard: v for k, v in point.values.items()}
        writer.point(Point(point.step, point.time_s, values))

    @staticmethod
    def _metric_point(writer: _ModeWriter, name: str, point: Point) -> None:
        values = {TRAIN[name].tensorboard: point.values[name]}
        writer.point(Point(max(point.step, 0), point.time_s, values))

    def log_metrics(self, mode: str, rows: Sequence[MetricRecord]) -> None:
        writer = self._modes.get(mode)
        if writer is not None:
            for name, point in writer.metrics.add(rows):
                self._metric_point(writer, name, point)

    def log_resources(self, mode: str, sample: ResourceSample) -> None:
        writer = self._modes.get(mode)
        if writer is None:
            return
        values = {}
        for series, value in sample_rows(sample):
            names = resource_name(series)
            if names is not None:
                values[names.tensorboard] = value
        writer.scalars(writer.samples, values, sample.timestamp)
        writer.samples += 1

    def end_mode(self, end: ModeEnd) -> None:
        writer = self._modes.get(end.name)
        if writer is None:
            return
        point = writer.steps.drain()
        if point is not None:
            self._step_point(writer, point)
        for name, metric in writer.metrics.drain():
            self._metric_point(writer, name, metric)
        figures = {summary_name(k).tensorboard: v for k, v in end.figures.items()}
        writer.scalars(writer.last_step, figures)
        writer.text("status", f"{end.status}" + (f": {end.error}" if end.error else ""))
        writer.writer.flush()

    def flush(self) -> None:
        for writer in list(self._modes.values()):
            writer.writer.flush()

    def close(self) -> None:
        modes, self._modes = self._modes, {}
        for writer in modes.values():
            writer.writer.close()

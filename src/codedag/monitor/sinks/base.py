"""The sink interface and the hub that fans the monitor's records out to every sink.

A sink overrides the methods of :class:`Sink` for what it records; the others do nothing. The
monitor calls them from two threads: :meth:`Sink.log_steps`, :meth:`Sink.log_metrics` and
:meth:`Sink.log_resources` mostly from the resource sampler's thread (once per sampling
interval, with every record buffered since), the steps and values also from the training thread
when it flushes or stops a mode, and the run's events from the training thread. Records of one
kind never arrive on two threads at once, and always in order; a sink that shares state between
kinds locks it. A sink must be cheap on the calling thread: one that talks to a server queues the
work (see :mod:`.mlflow`).

:class:`SinkHub` is how the monitor calls its sinks: a sink that raises is reported with one
warning and dropped, and the run and the other sinks go on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import IO

from codedag.monitor.probes import ResourceSample
from codedag.monitor.records import MetricRecord, ModeEnd, ModeInfo, RunInfo, StepRecord
from codedag.util.text import redact_uri

log = logging.getLogger(__name__)


class Sink:
    """Receives the monitor's records; every method does nothing unless overridden."""

    name = "sink"

    def open_run(self, run: RunInfo) -> None:
        """The run starts (before its first mode)."""

    def start_mode(self, mode: ModeInfo) -> None:
        """A mode starts."""

    def log_steps(self, mode: str, steps: Sequence[StepRecord]) -> None:
        """Steps of ``mode``, in order (called in blocks)."""

    def log_resources(self, mode: str, sample: ResourceSample) -> None:
        """One resource sample of ``mode`` (on the sampler's thread)."""

    def log_metrics(self, mode: str, rows: Sequence[MetricRecord]) -> None:
        """Losses and accuracies of ``mode``, in order (called in blocks)."""

    def end_mode(self, end: ModeEnd) -> None:
        """A mode ended; its records have all been delivered."""

    def log_artifact(self, path: Path) -> None:
        """A file of the run (the results file, a figure, the plan, the report)."""

    def flush(self) -> None:
        """Push what is buffered (the monitor flushes its results file)."""

    def close(self) -> None:
        """The run is over: finish and release everything."""

    def open_files(self) -> list[IO[str]]:
        """Files this sink holds open (silenced in forked processes)."""
        return []


class SinkHub:
    """Calls every sink in turn; a sink that raises is warned about once and dropped."""

    def __init__(self, sinks: Sequence[Sink] = ()) -> None:
        self._sinks: tuple[Sink, ...] = tuple(sinks)
        self._lock = threading.Lock()

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """The sinks still working."""
        return self._sinks

    def add(self, sink: Sink) -> None:
        """Add a sink (for the modes that start from now on)."""
        with self._lock:
            self._sinks = (*self._sinks, sink)

    def _failed(self, sink: Sink, what: str, error: BaseException) -> None:
        with self._lock:
            if sink not in self._sinks:
                return
            self._sinks = tuple(s for s in self._sinks if s is not sink)
        log.warning(
            "the %s sink failed in %s (%s: %s); it records nothing more, the run goes on",
            sink.name,
            what,
            type(error).__name__,
            redact_uri(error),  # a server's error may quote its URI, credentials and all
        )

    def _each(self, method: str, *args: object) -> None:
        for sink in self._sinks:
            try:
                getattr(sink, method)(*args)
            except Exception as error:
                self._failed(sink, method, error)

    def open_run(self, run: RunInfo) -> None:
        """See :meth:`Sink.open_run`."""
        self._each("open_run", run)

    def start_mode(self, mode: ModeInfo) -> None:
        """See :meth:`Sink.start_mode`."""
        self._each("start_mode", mode)

    def log_steps(self, mode: str, steps: Sequence[StepRecord]) -> None:
        """See :meth:`Sink.log_steps`."""
        self._each("log_steps", mode, steps)

    def log_resources(self, mode: str, sample: ResourceSample) -> None:
        """See :meth:`Sink.log_resources`."""
        self._each("log_resources", mode, sample)

    def log_metrics(self, mode: str, rows: Sequence[MetricRecord]) -> None:
        """See :meth:`Sink.log_metrics`."""
        self._each("log_metrics", mode, rows)

    def end_mode(self, end: ModeEnd) -> None:
        """See :meth:`Sink.end_mode`."""
        self._each("end_mode", end)

    def log_artifact(self, path: Path) -> None:
        """See :meth:`Sink.log_artifact`."""
        self._each("log_artifact", path)

    def flush(self) -> None:
        """See :meth:`Sink.flush`."""
        self._each("flush")

    def close(self) -> None:
        """See :meth:`Sink.close`."""
        self._each("close")

    def open_files(self) -> list[IO[str]]:
        """Every sink's open files."""
        out: list[IO[str]] = []
        for sink in self._sinks:
            try:
                out.extend(sink.open_files())
            except Exception as error:  # pragma: no cover - a sink's bookkeeping broke
                log.debug("open_files of the %s sink failed: %s", sink.name, error)
        return out

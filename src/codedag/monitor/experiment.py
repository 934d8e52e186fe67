"""ExperimentMonitor: one object that times batches, samples resources, logs metrics and saves.

Used like this::

    monitor = ExperimentMonitor("BirdCLEF_2023", save_dir="./results")
    monitor.start_mode("baseline", config={"epochs": 2}, resource_interval=1.0)
    for epoch in range(epochs):
        for batch_idx, (x, y) in enumerate(loader):
            monitor.start_batch()
            ...  # the unchanged training step
            monitor.end_batch()
            monitor.log_loss(epoch, batch_idx, loss.item())
    monitor.stop_mode()
    monitor.save_json()
    monitor.plot_metrics()

Each run gets a folder ``save_dir/<experiment_name>_<YYYYmmdd-HHMMSS>/`` holding ``results.json``,
the raw CSV streams and ``plots/``. Every record (step, resource sample, logged value, mode start
and end) also goes to the monitor's sinks (:mod:`codedag.monitor.sinks`): the CSV streams are
one, ``sinks=["tensorboard", "mlflow"]`` adds TensorBoard event files and an MLflow run. On the
training thread a step costs two clock reads and a tuple appended to a buffer, a logged value
one tuple; the resource sampler's thread folds the buffers into the statistics and hands the
records to the sinks every sampling interval, and ``flush``/``stop_mode`` fold what is left (with
sampling off, the training thread folds every 128 records). The JSON is rewritten atomically at
``start_mode``, every
``flush_interval_s`` during a mode, at ``stop_mode`` and ``save_json``; if the process ends while
a mode is running (Ctrl-C, an exception, ``sys.exit``), an exit hook marks the mode
``interrupted`` or ``failed`` and writes a complete file of everything measured. Monitoring never
raises into the training loop for a misuse such as ``end_batch()`` without ``start_batch()``:
it logs a warning and carries on. A monitor records only in the process that created it: calls
from a forked process (a DataLoader worker) are ignored there (:mod:`codedag.monitor.forksafe`).
"""

from __future__ import annotations

import logging
import math
import os
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from codedag.devices.distributed import distributed_launch, distributed_rank
from codedag.errors import WriteError
from codedag.monitor import forksafe
from codedag.monitor.environment import collect_environment
from codedag.monitor.exit_save import ExitSave, ending_status
from codedag.monitor.mode import ModeRecord, batch_size_of, plain_config
from codedag.monitor.mode_start import make_probe, new_mode_name, recorders, resource_sampler
from codedag.monitor.model import Environment, ModeSummary, RunResults
from codedag.monitor.records import ModeEnd, ModeInfo, RunInfo, summary_figures
from codedag.monitor.resources import Probe
from codedag.monitor.results import SCHEMA_VERSION
from codedag.monitor.sinks.base import Sink, SinkHub
from codedag.monitor.sinks.csv import HEADERS, CsvSink, csv_files
from codedag.monitor.sinks.specs import make_sinks
from codedag.monitor.timer import WARMUP_BATCHES, Timer
from codedag.util.io import atomic_write_json
from codedag.util.signals import deferred_interrupts

log = logging.getLogger(__name__)
T = TypeVar("T")


class ExperimentMonitor:
    """Batch timing, data wait, resources, losses and accuracies per mode, saved as JSON.

    Args:
        experiment_name: names the run folder and the results.
        save_dir: parent folder of the run folder.
        cuda_timing: ``"auto"``, ``"sync"``, ``"events"`` or ``"none"`` (see ``Timer``).
        flush_interval_s: seconds between periodic JSON rewrites during a mode (0 disables).
        stream_to_disk: write every raw sample to CSV files next to the JSON.
        downsample_capacity: most points per series kept in memory and in the JSON.
        probe_factory: builds the resource probe for a mode (``SystemProbe`` by default).
        run_dir: exact folder for this run instead of ``save_dir/<name>_<time>``.
        handle_sigterm: while a mode runs, turn SIGTERM (``docker stop``, batch schedulers) into
            ``SystemExit(143)`` so the results are saved as ``interrupted``; installed only from
            the main thread over the default handler, and restored at ``stop_mode``.
        sinks: where the records go besides ``results.json``: :class:`Sink` objects or names
            (``"tensorboard"``, ``"mlflow"``, ``"mlflow:URI"``; see
            :mod:`codedag.monitor.sinks.specs`). A sink whose package is missing, or that fails,
            is one warning; the run goes on.
        warmup_batches: first steps of each mode left out of the steady-state summary.
    """

    def __init__(
        self,
        experiment_name: str = "experiment",
        save_dir: str | Path = "./results",
        *,
        cuda_timing: str = "auto",
        flush_interval_s: float = 30.0,
        stream_to_disk: bool = True,
        downsample_capacity: int = 2048,
        probe_factory: Callable[[], Probe] | None = None,
        run_dir: str | Path | None = None,
        handle_sigterm: bool = False,
        sinks: Iterable[Sink | str] = (),
        warmup_batches: int = WARMUP_BATCHES,
    ) -> None:
        Timer(cuda_timing, warmup_batches=warmup_batches)  # validates now, not at the first batch
        self.experiment_name = str(experiment_name)
        self.save_dir = Path(save_dir)
        self.cuda_timing = cuda_timing
        self.flush_interval_s = float(flush_interval_s)
        self.stream_to_disk = stream_to_disk
        self.downsample_capacity = downsample_capacity
        self._probe_factory = probe_factory
        self.timestamp = int(time.time())
        self.datetime = datetime.fromtimestamp(self.timestamp).astimezone().isoformat()
        stamp = datetime.fromtimestamp(self.timestamp).strftime("%Y%m%d-%H%M%S")
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", self.experiment_name) or "experiment"
        self.rank, self.world_size = distributed_rank()
        self.launch = distributed_launch()
        if self.world_size > 1:  # torchrun & co.: one folder per rank, never one file for all
            safe = f"{safe}_rank{self.rank}"
        self.run_dir = Path(run_dir) if run_dir is not None else self.save_dir / f"{safe}_{stamp}"
        self.environment: dict[str, Any] = {}
        self._modes: dict[str, ModeRecord] = {}
        self._current: ModeRecord | None = None
        self._flush_at = 0.0  # perf_counter time of the next periodic flush
        self.handle_sigterm = handle_sigterm
        self.warmup_batches = warmup_batches
        self._hub = SinkHub(
            [*([CsvSink(self.run_dir)] if stream_to_disk else []), *make_sinks(sinks)]
        )
        self._run_open = False
        self._pid = os.getpid()  # the owner: other processes (forks) record nothing
        self._exit = ExitSave(self, self._pid, handle_sigterm)
        forksafe.register(self)

    # ------------------------------------------------------------------ modes
    @property
    def results_path(self) -> Path:
        """Where ``save_json()`` writes by default."""
        return self.run_dir / "results.json"

    @property
    def current_mode(self) -> str | None:
        """The running mode's name, or ``None``."""
        return self._current.name if self._current is not None else None

    def start_mode(
        self,
        mode: str,
        config: dict[str, Any] | None = None,
        resource_interval: float | None = 1.0,
        *,
        cuda_timing: str | None = None,
    ) -> None:
        """Start measuring a mode (``"baseline"``, ``"optimization"``, ...).

        Args:
            mode: the mode's name; a name used before gets a ``_2``, ``_3`` ... suffix.
            config: the run's settings, saved with the results.
            resource_interval: seconds between resource samples; ``None`` disables sampling.
            cuda_timing: override the monitor's ``cuda_timing`` for this mode.
        """
        if forksafe.ignored_here(self._pid, "start_mode"):
            return
        if self._current is not None:
            log.warning("start_mode(%r) while %r is running: stopping it", mode, self._current.name)
            self.stop_mode()
        name = new_mode_name(str(mode), self._modes)
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
        files: dict[str, str | None] = (
            dict(csv_files(safe)) if self.stream_to_disk else dict.fromkeys(HEADERS)
        )
        hub = self._hub
        timer, metrics = recorders(
            hub,
            name,
            cuda_timing or self.cuda_timing,
            resource_interval,
            warmup_batches=self.warmup_batches,
            downsample_capacity=self.downsample_capacity,
        )
        resources = None
        describe: dict[str, Any] = {}
        if resource_interval is not None:
            resources, describe = resource_sampler(
                make_probe(self._probe_factory),
                hub,
                name,
                resource_interval,
                self.downsample_capacity,
                (timer, metrics),
            )
        current = ModeRecord(
            name, plain_config(config or {}), timer, metrics, resources, files, describe
        )
        self._modes[name] = current
        self._current = current
        if not self.environment or (describe and "cpu_source" not in self.environment):
            self.environment = collect_environment(describe)
        self._open_run()
        limits = describe if "cpu_capacity_cpus" in describe else self.environment
        hub.start_mode(
            ModeInfo(
                name=name,
                file_stem=safe,
                config=current.config,
                started_at=current.started_at,
                cpu_limit_cpus=limits.get("cpu_limit_cpus"),
                cpu_capacity_cpus=limits.get("cpu_capacity_cpus"),
                resource_interval_s=resource_interval,
            )
        )
        self._exit.install()
        self.flush()
        if resources is not None:
            resources.start()
        timer.start()

    def _open_run(self) -> None:
        """Tell the sinks the run started (once) and close them at exit if nobody does."""
        if self._run_open:
            return
        self._run_open = True
        self._hub.open_run(RunInfo(self.experiment_name, self.run_dir, dict(self.environment)))
        self._exit.close_at_exit()

    def add_sink(self, sink: Sink | str) -> None:
        """Send the records of the modes that start from now on to one more sink."""
        for made in make_sinks([sink]):
            if self._run_open:
                made.open_run(RunInfo(self.experiment_name, self.run_dir, dict(self.environment)))
            self._hub.add(made)

    @property
    def sinks(self) -> tuple[Sink, ...]:
        """The sinks still recording (one that failed is dropped)."""
        return self._hub.sinks

    def log_artifact(self, path: str | Path) -> None:
        """Hand a file of the run (a migration plan, a report) to the sinks that keep files."""
        if forksafe.ignored_here(self._pid, "log_artifact"):
            return
        self._hub.log_artifact(Path(path))

    def close(self) -> None:
        """Stop a running mode, write the results and finish every sink (idempotent).

        Called at interpreter exit when a run was opened and nobody closed it.
        """
        if forksafe.ignored_here(self._pid, "close"):
            return
        if self._current is not None:
            self.stop_mode()
        self._exit.keep_open_at_exit()
        if self._run_open:
            self._hub.close()
            self._run_open = False

    def stop_mode(self, status: str = "completed", error: str | None = None) -> ModeSummary:
        """Stop the running mode, write the JSON, and return the mode's summary (empty when no
        mode was running).

        An interruption (Ctrl-C, SIGTERM under the codedag CLI) arriving meanwhile is raised once
        the results are written.
        """
        if forksafe.ignored_here(self._pid, "stop_mode"):
            return ModeSummary()
        with deferred_interrupts():
            return self._stop_mode(status, error)

    def _stop_mode(self, status: str, error: str | None) -> ModeSummary:
        current = self._current
        if current is None:
            log.warning("stop_mode() without a running mode: ignored")
            return ModeSummary()
        self._current = None
        current.timer.stop()
        current.metrics.fold()
        if current.resources is not None:
            current.resources.stop()
            close = getattr(current.resources.probe, "close", None)
            if callable(close):
                try:
                    close()  # release NVML; the next mode opens its own probe
                except Exception as failure:
                    log.debug("closing the resource probe failed: %s", failure)
        current.status = status
        current.error = error
        current.ended_at = time.time()
        summary = current.results().summary
        self._hub.end_mode(
            ModeEnd(name=current.name, status=status, error=error,
                    steps=current.timer.num_batches, figures=summary_figures(summary))
        )  # fmt: skip
        self.flush()
        self._exit.remove()
        return summary

    @contextmanager
    def mode(
        self, mode: str, config: dict[str, Any] | None = None, resource_interval: float | None = 1.0
    ) -> Iterator[ExperimentMonitor]:
        """``start_mode`` ... ``stop_mode`` that records an exception or Ctrl-C as the status."""
        self.start_mode(mode, config, resource_interval)
        try:
            yield self
        except BaseException as exc:
            self.stop_mode(*ending_status(exc))
            raise
        else:
            self.stop_mode()

    def __enter__(self) -> ExperimentMonitor:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._current is not None:
            if exc is None:
                self.stop_mode()
            else:
                self.stop_mode(*ending_status(exc))
        self.save_json()
        self.close()

    # ---------------------------------------------------------------- batches
    # The three calls of every step check, in one comparison each, that a mode runs in the
    # monitor's own process; anything else (a forked worker, no mode) takes ``_refused``.
    def start_batch(self) -> None:
        """Mark the start of a training step (after the batch arrived)."""
        current = self._current
        if current is None or forksafe.pid != self._pid:
            self._refused("start_batch")
            return
        current.timer.start_batch()

    def end_batch(self, n_samples: int = 0) -> None:
        """Mark the end of a training step; ``n_samples`` (optional) gives samples/s."""
        current = self._current
        if current is None or forksafe.pid != self._pid:
            self._refused("end_batch")
            return
        if current.timer.end_batch(n_samples) >= self._flush_at:
            with current.timer.paused():  # the flush is not the input pipeline's time
                self.flush()

    def _refused(self, what: str) -> None:
        """A call that records nothing: from a forked process, or without a running mode."""
        if not forksafe.ignored_here(self._pid, what):
            self._warn_no_mode(what)

    @contextmanager
    def paused(self) -> Iterator[None]:
        """Exclude a block (validation, checkpointing) from the next batch's data wait."""
        if self._current is None:
            yield
            return
        with self._current.timer.paused():
            yield

    def track(
        self, iterable: Iterable[T], n_samples: Callable[[T], int] | None = None
    ) -> Iterator[T]:
        """Yield from ``iterable`` (a DataLoader), timing each step around the loop body.

        ``for batch in monitor.track(loader):`` calls ``start_batch()`` when a batch arrives and
        ``end_batch()`` when the loop asks for the next one, so the wait inside the loader is the
        data wait and the loop body is the batch time.
        """
        open_batch = False
        try:
            for item in iterable:
                self.start_batch()
                open_batch = True
                yield item
                self.end_batch(batch_size_of(item, n_samples))
                open_batch = False
        finally:
            if open_batch and self._current is not None:
                # the consumer broke out or raised in the body: that batch is not complete
                self._current.timer.abandon_batch()

    # ---------------------------------------------------------------- metrics
    def log_loss(self, epoch: int, batch: int, value: object) -> None:
        """Record a loss (``loss.item()``) for ``batch`` of ``epoch``."""
        self._log_metric("loss", epoch, batch, value)

    def log_accuracy(self, epoch: int, batch: int, value: object) -> None:
        """Record an accuracy for ``batch`` of ``epoch``."""
        self._log_metric("accuracy", epoch, batch, value)

    def _log_metric(self, metric: str, epoch: int, batch: int, value: object) -> None:
        target = self._current
        if target is None or forksafe.pid != self._pid:
            target = self._metrics_target(f"log_{metric}")
            if target is None:
                return
        step, time_s = target.timer.position()
        target.metrics.log(metric, epoch, batch, value, step, time_s)

    def _metrics_target(self, what: str) -> ModeRecord | None:
        if forksafe.ignored_here(self._pid, what):
            return None
        if self._current is not None:
            return self._current
        if self._modes:  # e.g. a final accuracy logged right after stop_mode()
            return next(reversed(self._modes.values()))
        self._warn_no_mode(what)
        return None

    def _warn_no_mode(self, what: str) -> None:
        log.warning("%s() called without a running mode (call start_mode first): ignored", what)

    # ----------------------------------------------------------------- output
    def results(self) -> RunResults:
        """The full results (a running mode included, with status ``running``)."""
        from codedag.version import __version__

        return RunResults(
            schema_version=SCHEMA_VERSION,
            codedag_version=__version__,
            experiment_name=self.experiment_name,
            timestamp=self.timestamp,
            datetime=self.datetime,
            environment=Environment.model_validate(
                {
                    **self.environment,
                    "rank": self.rank,
                    "world_size": self.world_size,
                    "launch": self.launch,
                }
            ),
            modes={name: m.results() for name, m in self._modes.items()},
        )

    def to_dict(self) -> dict[str, Any]:
        """The full results as the JSON dict ``results.json`` holds."""
        return self.results().to_dict()

    def flush(self) -> Path | None:
        """Write the JSON and the CSV buffers now; a failed write is logged, not raised."""
        if forksafe.ignored_here(self._pid, "flush"):
            return None
        interval = self.flush_interval_s
        self._flush_at = time.perf_counter() + interval if interval > 0 else math.inf
        data = self.to_dict()  # folds the rows buffered on the hot path into the sinks
        self._hub.flush()
        try:
            return atomic_write_json(self.results_path, data)
        except WriteError as error:  # a full disk: training goes on, the next flush retries
            log.warning("%s", error)
            return None
        except (OSError, ValueError, TypeError) as error:
            log.warning("could not write %s: %s", self.results_path, error)
            return None

    def save_json(self, path: str | Path | None = None) -> Path:
        """Write the results JSON (atomically) and return its path (in a forked process: nothing
        is written, the owner's results path is returned)."""
        if forksafe.ignored_here(self._pid, "save_json"):
            return self.results_path
        results = self.results()
        target = Path(path) if path is not None else self.results_path
        if target.resolve() != self.results_path.resolve():
            atomic_write_json(self.results_path, results.to_dict())
            # the CSV names are relative to the run folder; make them resolve from ``target``
            base = os.path.abspath(target.parent)
            for mode in results.modes.values():
                mode.files = {
                    kind: os.path.relpath(self.run_dir.absolute() / name, base) if name else None
                    for kind, name in mode.files.items()
                }
        atomic_write_json(target, results.to_dict())
        log.info("results written to %s", target)
        self._hub.log_artifact(target)
        return target

    def plot_metrics(self, out_dir: str | Path | None = None) -> list[Path]:
        """Render the comparison figures (PNG) into ``out_dir`` (default ``<run dir>/plots``)."""
        from codedag.monitor.plots import plot_results

        folder = Path(out_dir) if out_dir is not None else self.run_dir / "plots"
        figures = plot_results(self.results(), folder)
        if figures and not forksafe.ignored_here(self._pid, "plot_metrics"):
            self._hub.log_artifact(folder)
        return figures

    # --------------------------------------------------------------- exit hook
    def open_stream_files(self) -> list[Any]:
        """File objects the sinks hold open (the raw CSV streams; for :mod:`forksafe`)."""
        return self._hub.open_files()

"""One callback monitors a Lightning ``Trainer.fit``; the training code does not change.

::

    from codedag.integrations.lightning import CodedagCallback

    trainer = Trainer(callbacks=[CodedagCallback(sinks=["tensorboard"])])
    trainer.fit(model, datamodule)   # results in <default_root_dir>/codedag/<Model>_<time>/

The callback drives an :class:`~codedag.monitor.experiment.ExperimentMonitor` exactly as a
hand-written loop does: a step starts when Lightning hands the batch to the training step
(``on_train_batch_start``) and ends after the optimizer step (``on_train_batch_end``), so each
step's data wait is the time from the previous step's end: the DataLoader's next batch plus
Lightning's own work between steps. Samples per batch come from the batch's first tensor, the
loss from the training step's output, an accuracy from ``trainer.callback_metrics`` when the
module logs one (``accuracy_key``), and validation is left out of the data wait. The records go
to ``results.json``, the monitor's sinks and, with ``log_to_trainer``, to the trainer's own loggers
(``TensorBoardLogger``, ``MLFlowLogger``, ...) under ``codedag/``.

Needs ``lightning`` (or ``pytorch_lightning``): the ``codedag[lightning]`` extra.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from codedag.integrations.lightning_base import Callback as _Callback
from codedag.integrations.lightning_base import require_lightning
from codedag.monitor.callbacks import MonitorCallback
from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.probes import ResourceSample
from codedag.monitor.records import ModeEnd, StepRecord
from codedag.monitor.resources import sample_rows
from codedag.monitor.sinks.base import Sink
from codedag.monitor.sinks.names import STEP, resource_name, summary_name
from codedag.monitor.sinks.window import StepWindow


class TrainerLoggersSink(Sink):
    """codedag's per-step figures, resources and summary in a trainer's loggers.

    Everything is written from the training thread (resource samples are held until the next
    steps arrive), since a logger need not be thread-safe. Keys are ``codedag/`` followed by the
    TensorBoard names of :mod:`codedag.monitor.sinks.names`.

    Args:
        loggers: Lightning loggers (anything with ``log_metrics(metrics, step)``).
        min_interval_s: seconds of training between two points of the per-step figures.
    """

    name = "lightning-loggers"

    def __init__(self, loggers: Sequence[Any], min_interval_s: float = 1.0) -> None:
        self.loggers = list(loggers)
        self.min_interval_s = float(min_interval_s)
        self._windows: dict[str, StepWindow] = {}
        self._held: list[dict[str, float]] = []
        self._lock = threading.Lock()
        self._step = 0

    def _log(self, metrics: dict[str, float], step: int) -> None:
        for logger in self.loggers:
            logger.log_metrics(metrics, step=step)

    def log_steps(self, mode: str, steps: Sequence[StepRecord]) -> None:
        window = self._windows.setdefault(mode, StepWindow(self.min_interval_s))
        for point in window.add(steps):
            self._log(
                {f"codedag/{STEP[k].tensorboard}": v for k, v in point.values.items()}, point.step
            )
        if steps:
            self._step = steps[-1].step
        with self._lock:
            held, self._held = self._held, []
        for metrics in held:
            self._log(metrics, self._step)

    def log_resources(self, mode: str, sample: ResourceSample) -> None:
        metrics = {}
        for series, value in sample_rows(sample):
            names = resource_name(series)
            if names is not None:
                metrics[f"codedag/{names.tensorboard}"] = value
        with self._lock:
            self._held.append(metrics)

    def end_mode(self, end: ModeEnd) -> None:
        window = self._windows.pop(end.name, None)
        point = window.drain() if window is not None else None
        if point is not None:
            self._log(
                {f"codedag/{STEP[k].tensorboard}": v for k, v in point.values.items()}, point.step
            )
        figures = {f"codedag/{summary_name(k).tensorboard}": v for k, v in end.figures.items()}
        if figures:
            self._log(figures, max(end.steps - 1, 0))


class CodedagCallback(MonitorCallback, *((_Callback,) if _Callback is not None else ())):  # type: ignore[misc]
    """Monitors ``Trainer.fit`` with an :class:`ExperimentMonitor`.

    Args:
        monitor: the monitor to drive; ``None``: one made at ``setup``, named ``experiment_name``
            (default: the LightningModule's class) in ``<trainer.default_root_dir>/codedag``.
        mode: the mode recorded for this fit (``baseline``, ``optimization``).
        config: saved with the mode.
        resource_interval: seconds between resource samples (``None``: no sampling).
        accuracy_key: key of ``trainer.callback_metrics`` logged as accuracy, when present.
        sinks: sinks of a monitor the callback makes (``"tensorboard"``, ``"mlflow"``, ...).
        experiment_name: name of a monitor the callback makes.
        log_to_trainer: also write codedag's figures into the trainer's loggers.
        save: write the results file when training ends.
        plot: render the figures too when training ends.

    Raises:
        ConfigError: lightning (or pytorch_lightning) is not installed.
    """

    def __init__(
        self,
        monitor: ExperimentMonitor | None = None,
        mode: str = "baseline",
        config: dict[str, Any] | None = None,
        resource_interval: float | None = 1.0,
        accuracy_key: str = "train_acc",
        *,
        sinks: Iterable[Sink | str] = (),
        experiment_name: str | None = None,
        log_to_trainer: bool = True,
        save: bool = True,
        plot: bool = False,
    ) -> None:
        require_lightning(
            "CodedagCallback",
            "use codedag.monitor.callbacks.MonitorCallback with a Lightning-style loop",
        )
        self._own_monitor = monitor is None
        self._loggers_connected = False
        self._sinks = list(sinks)
        self.experiment_name = experiment_name
        self.log_to_trainer = log_to_trainer
        super().__init__(
            monitor,  # type: ignore[arg-type]  # made at setup when None
            mode,
            config,
            resource_interval,
            accuracy_key,
            save,
            plot,
        )

    def setup(self, trainer: object, pl_module: object, stage: str) -> None:
        """Make the monitor (when none was given) and connect the trainer's loggers."""
        if self.monitor is None:
            name = self.experiment_name or type(pl_module).__name__
            root = Path(getattr(trainer, "default_root_dir", None) or ".") / "codedag"
            self.monitor = ExperimentMonitor(name, save_dir=root, sinks=self._sinks)
        loggers = list(getattr(trainer, "loggers", None) or [])
        if self.log_to_trainer and loggers and not self._loggers_connected:
            self.monitor.add_sink(TrainerLoggersSink(loggers))
            self._loggers_connected = True

    def teardown(self, trainer: object, pl_module: object, stage: str) -> None:
        """Finish the sinks of a monitor the callback made."""
        if self._own_monitor and self.monitor is not None:
            self.monitor.close()

"""Monitoring for existing loops in two lines: a loop wrapper and a Lightning-style callback.

Plain loop::

    monitor = ExperimentMonitor("exp", "./results")
    with monitor.mode("baseline", config=cfg):
        for inputs, targets in monitor.track(loader):   # data wait vs step, samples/s
            ...

Lightning-style hooks, duck-typed (lightning is not a dependency); with lightning installed,
:class:`codedag.integrations.lightning.CodedagCallback` is the real ``Callback`` built on them::

    trainer = Trainer(callbacks=[CodedagCallback()])
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.mode import batch_size_of

log = logging.getLogger(__name__)


def _scalar(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return _scalar(value.get("loss"))
    try:
        return float(value.detach() if hasattr(value, "detach") else value)
    except (TypeError, ValueError):
        return None


@dataclass(eq=False)
class MonitorCallback:
    """Lightning-style hooks driving an :class:`ExperimentMonitor`.

    Args:
        monitor: the monitor to drive.
        mode: the mode recorded for this fit.
        config: saved with the mode.
        resource_interval: seconds between resource samples.
        accuracy_key: key in ``trainer.callback_metrics`` logged as accuracy, when present.
        save: write the JSON (and plots when ``plot``) when training ends.
    """

    monitor: ExperimentMonitor
    mode: str = "baseline"
    config: dict[str, Any] | None = None
    resource_interval: float | None = 1.0
    accuracy_key: str = "train_acc"
    save: bool = True
    plot: bool = False

    def on_train_start(self, trainer: object, pl_module: object) -> None:
        self.monitor.start_mode(self.mode, self.config, self.resource_interval)

    def on_train_batch_start(
        self, trainer: object, pl_module: object, batch: object, batch_idx: int
    ) -> None:
        self.monitor.start_batch()

    def on_train_batch_end(
        self, trainer: object, pl_module: object, outputs: object, batch: object, batch_idx: int
    ) -> None:
        self.monitor.end_batch(batch_size_of(batch, None))
        epoch = int(getattr(trainer, "current_epoch", 0) or 0)
        loss = _scalar(outputs)
        if loss is not None:
            self.monitor.log_loss(epoch, batch_idx, loss)
        metrics = getattr(trainer, "callback_metrics", None) or {}
        accuracy = _scalar(metrics.get(self.accuracy_key))
        if accuracy is not None:
            self.monitor.log_accuracy(epoch, batch_idx, accuracy)

    def on_validation_start(self, trainer: object, pl_module: object) -> None:
        self._validation: Any = self.monitor.paused()
        self._validation.__enter__()

    def on_validation_end(self, trainer: object, pl_module: object) -> None:
        validation = getattr(self, "_validation", None)
        if validation is not None:
            validation.__exit__(None, None, None)
            self._validation = None

    def on_train_end(self, trainer: object, pl_module: object) -> None:
        if self.monitor.current_mode is not None:
            self.monitor.stop_mode()
        self._finish()

    def on_exception(self, trainer: object, pl_module: object, exception: BaseException) -> None:
        if self.monitor.current_mode is not None:
            status = "interrupted" if isinstance(exception, KeyboardInterrupt) else "failed"
            self.monitor.stop_mode(status, f"{type(exception).__name__}: {exception}")
        self._finish()

    def _finish(self) -> None:
        if self.save:
            self.monitor.save_json()
            if self.plot:
                self.monitor.plot_metrics()

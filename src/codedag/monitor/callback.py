"""MonitorCallback: ExperimentMonitor as a Lightning-style callback, in two lines.

::

    monitor = ExperimentMonitor("my_exp", save_dir="./results")
    trainer = Trainer(callbacks=[MonitorCallback(monitor, mode="baseline")])

The class has the hooks a Lightning ``Trainer`` calls (``on_train_start``,
``on_train_epoch_start``, ``on_train_batch_start``, ``on_train_batch_end``,
``on_validation_start``/``end``, ``on_train_end``, ``on_exception``) with Lightning's signatures,
and answers every other hook name with a no-op, so it needs no Lightning import; any loop that
calls these hooks (a custom trainer, Accelerate-style loops) works the same way.

- a batch's time runs from ``on_train_batch_start`` to ``on_train_batch_end``; the data wait is the
  time before ``on_train_batch_start`` since the previous batch ended (loading the batch);
- an epoch start and the end of validation restart the data-wait clock, so validation is not
  counted as waiting for training data;
- the loss comes from the step's output (a tensor, or a dict with ``"loss"``), the accuracy from
  ``trainer.callback_metrics`` under the first of ``accuracy_keys`` that is present.
  Reading a CUDA scalar synchronizes; ``log_every_n_steps`` limits how often that happens.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.mode import count_samples

log = logging.getLogger(__name__)

# Hook names of lightning.pytorch.Callback that this class leaves as no-ops.
_NOOP_PREFIXES = ("on_", "setup", "teardown")


def _scalar(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, dict):
        return _scalar(value.get("loss"))
    try:
        return float(value.detach() if hasattr(value, "detach") else value)
    except (TypeError, ValueError, RuntimeError):
        return None


class MonitorCallback:
    """Drives an :class:`ExperimentMonitor` from Lightning-style training hooks.

    Args:
        monitor: the monitor (one per experiment; one callback per mode).
        mode: the mode name recorded (``"baseline"``, ``"optimization"``, ...).
        config: settings saved with the mode (default: ``trainer.max_epochs`` and the module's
            ``hparams`` when present).
        resource_interval: seconds between resource samples (``None``: no sampling).
        accuracy_keys: names in ``trainer.callback_metrics`` tried for the accuracy.
        log_every_n_steps: log loss/accuracy every n-th batch (1: every batch).
        save: write the JSON when training ends.
        n_samples: batch -> number of samples (default: first dimension of the first tensor).
    """

    def __init__(
        self,
        monitor: ExperimentMonitor,
        mode: str = "baseline",
        *,
        config: dict[str, Any] | None = None,
        resource_interval: float | None = 1.0,
        accuracy_keys: Sequence[str] = ("train_acc", "train_accuracy", "acc", "accuracy"),
        log_every_n_steps: int = 1,
        save: bool = True,
        n_samples: Callable[[Any], int] | None = None,
    ) -> None:
        self.monitor = monitor
        self.mode = mode
        self.config = config
        self.resource_interval = resource_interval
        self.accuracy_keys = tuple(accuracy_keys)
        self.log_every_n_steps = max(1, int(log_every_n_steps))
        self.save = save
        self.n_samples = n_samples
        self.epoch = 0
        self._running = False

    # Lightning asks callbacks for these when checkpointing.
    @property
    def state_key(self) -> str:
        """Unique key of this callback in a checkpoint."""
        return f"MonitorCallback[{self.mode}]"

    @property
    def _legacy_state_key(self) -> str:  # read by Lightning when restoring old checkpoints
        return type(self).__qualname__

    @classmethod
    def for_lightning(cls, *args: Any, **kwargs: Any) -> MonitorCallback:
        """The same callback as a subclass of Lightning's ``Callback`` (for ``isinstance`` checks).

        Imports ``lightning.pytorch`` (or ``pytorch_lightning``); takes this class's arguments.

        Raises:
            ConfigError: neither package is installed.
        """
        try:
            from lightning.pytorch import Callback
        except ImportError:
            try:
                from pytorch_lightning import Callback
            except ImportError as error:
                from codedag.errors import ConfigError

                raise ConfigError(
                    "for_lightning() needs lightning (pip install lightning); got neither "
                    "lightning.pytorch nor pytorch_lightning"
                ) from error
        subclass = type(f"Lightning{cls.__name__}", (cls, Callback), {})
        return subclass(*args, **kwargs)

    def state_dict(self) -> dict[str, Any]:
        """Nothing to checkpoint: measurements live in the monitor's run folder."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Nothing to restore."""

    def __getattr__(self, name: str) -> Any:
        # Any other Lightning hook (on_fit_start, on_save_checkpoint, setup, ...) is a no-op.
        if name.startswith(_NOOP_PREFIXES):
            return _noop
        raise AttributeError(f"{type(self).__name__!s} has no attribute {name!r}")

    # ------------------------------------------------------------------ hooks
    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        """Start the mode."""
        config = self.config if self.config is not None else _default_config(trainer, pl_module)
        self.monitor.start_mode(self.mode, config, self.resource_interval)
        self._running = True

    def on_train_epoch_start(self, trainer: Any, pl_module: Any) -> None:
        """Remember the epoch; the first batch's wait counts from here."""
        self.epoch = int(getattr(trainer, "current_epoch", self.epoch) or 0)
        self.monitor.reset_data_wait()

    def on_train_batch_start(
        self, trainer: Any, pl_module: Any, batch: Any, batch_idx: int
    ) -> None:
        """The batch arrived: the step starts."""
        self.monitor.start_batch()

    def on_train_batch_end(
        self, trainer: Any, pl_module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        """The step ended: record its time, its loss and (when logged) its accuracy."""
        self.monitor.end_batch(count_samples(batch, self.n_samples))
        if batch_idx % self.log_every_n_steps:
            return
        loss = _scalar(outputs)
        if loss is not None:
            self.monitor.log_loss(self.epoch, batch_idx, loss)
        metrics = getattr(trainer, "callback_metrics", None) or {}
        for key in self.accuracy_keys:
            if key in metrics:
                value = _scalar(metrics[key])
                if value is not None:
                    self.monitor.log_accuracy(self.epoch, batch_idx, value)
                break

    def on_validation_end(self, trainer: Any, pl_module: Any) -> None:
        """Validation is not the training pipeline's wait."""
        self.monitor.reset_data_wait()

    def on_train_end(self, trainer: Any, pl_module: Any) -> None:
        """Stop the mode and write the results."""
        self._finish("completed", None)

    def on_exception(self, trainer: Any, pl_module: Any, exception: BaseException) -> None:
        """Record the failure (or Ctrl-C) and write what was measured."""
        if isinstance(exception, KeyboardInterrupt):
            self._finish("interrupted", "KeyboardInterrupt")
        else:
            self._finish("failed", f"{type(exception).__name__}: {exception}")

    def _finish(self, status: str, error: str | None) -> None:
        if not self._running:
            return
        self._running = False
        self.monitor.stop_mode(status, error)
        if self.save:
            self.monitor.save_json()


def _noop(*args: Any, **kwargs: Any) -> None:
    return None


def _default_config(trainer: Any, pl_module: Any) -> dict[str, Any]:
    config: dict[str, Any] = {}
    for key in ("max_epochs", "max_steps", "precision", "accumulate_grad_batches"):
        value = getattr(trainer, key, None)
        if isinstance(value, int | float | str):
            config[key] = value
    hparams = getattr(pl_module, "hparams", None)
    if hparams:
        try:
            config["hparams"] = dict(hparams)
        except (TypeError, ValueError):
            log.debug("hparams of %s are not a mapping", type(pl_module).__name__)
    return config

"""Loss and accuracy logging with constant memory and honest handling of NaN/inf."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from typing import Any

from codedag.monitor.records import MetricRecord
from codedag.monitor.stats import Downsampler

log = logging.getLogger(__name__)

_BLOCK = 128  # values buffered on the training thread before they are folded (see Timer)


class _Track:
    """One metric: first, last, min, max, a downsampled ``[epoch, batch, value]`` series."""

    __slots__ = ("first", "last", "max", "min", "nonfinite", "series")

    def __init__(self, capacity: int) -> None:
        self.series = Downsampler(capacity, width=1)
        self.first: float | None = None
        self.last: float | None = None
        self.min = math.inf
        self.max = -math.inf
        self.nonfinite = 0

    def add(self, epoch: int, batch: int, value: float) -> None:
        if not math.isfinite(value):
            self.nonfinite += 1
            return
        if self.first is None:
            self.first = value
        self.last = value
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value
        self.series.add((epoch, batch), value)

    def points(self) -> list[list[float]]:
        return [[x[0], x[1], y] for x, y in self.series.points()]

    @property
    def count(self) -> int:
        return self.series.count


class MetricsLogger:
    """Records losses and accuracies as the original API's ``[(epoch, batch, value)]`` series.

    Non-finite values (a diverging loss) are counted in ``nonfinite`` and passed on to
    ``on_metrics`` (the raw CSV keeps them), never averaged into the series: JSON has no NaN and
    one NaN would poison every summary.

    Args:
        on_metrics: receives every logged value, in blocks.
        downsample_capacity: most points per metric kept in memory.
    """

    def __init__(
        self,
        on_metrics: Callable[[list[MetricRecord]], None] | None = None,
        downsample_capacity: int = 2048,
    ) -> None:
        self._on_metrics = on_metrics
        self.losses = _Track(downsample_capacity)
        self.accuracies = _Track(downsample_capacity)
        self._rows: list[MetricRecord] = []

    @staticmethod
    def _value(value: Any, what: str) -> float:
        try:
            return float(value)  # accepts python numbers, numpy scalars, 0-d tensors
        except (TypeError, ValueError) as error:
            from codedag.errors import ConfigError

            raise ConfigError(f"{what} must be a number, got {type(value).__name__}") from error

    def log_loss(
        self, epoch: int, batch: int, value: object, step: int = -1, time_s: float = 0.0
    ) -> None:
        """Record the loss of ``batch`` in ``epoch`` (``step`` and ``time_s``: the mode's step
        it belongs to and when, for dashboards)."""
        row = ("loss", int(epoch), int(batch), self._value(value, "loss"), step, time_s)
        self._rows.append(tuple.__new__(MetricRecord, row))  # without the Python-level __new__
        if len(self._rows) >= _BLOCK:
            self.fold()

    def log_accuracy(
        self, epoch: int, batch: int, value: object, step: int = -1, time_s: float = 0.0
    ) -> None:
        """Record the accuracy (a fraction or a percent, as the caller uses) of ``batch``."""
        row = ("accuracy", int(epoch), int(batch), self._value(value, "accuracy"), step, time_s)
        self._rows.append(tuple.__new__(MetricRecord, row))
        if len(self._rows) >= _BLOCK:
            self.fold()

    def fold(self) -> None:
        """Fold the values buffered on the training thread into the series and the sinks."""
        rows, self._rows = self._rows, []
        if not rows:
            return
        for row in rows:
            (self.losses if row.name == "loss" else self.accuracies).add(
                row.epoch, row.batch, row.value
            )
        if self._on_metrics is not None:
            self._on_metrics(rows)

    def series(self) -> dict[str, list[list[float]]]:
        """``{"losses": [[epoch, batch, value]], "accuracies": [...]}`` (downsampled when long)."""
        self.fold()
        return {"losses": self.losses.points(), "accuracies": self.accuracies.points()}

    def strides(self) -> dict[str, int]:
        """Raw values per kept point for each series."""
        self.fold()
        return {"losses": self.losses.series.stride, "accuracies": self.accuracies.series.stride}

    def summary(self) -> dict[str, Any]:
        """The original API's ``loss`` and ``accuracy`` summaries; ``None`` where nothing was logged."""
        self.fold()
        out: dict[str, Any] = {"loss": None, "accuracy": None}
        loss, acc = self.losses, self.accuracies
        if loss.first is not None:
            out["loss"] = {
                "initial": loss.first,
                "final": loss.last,
                "min": loss.min,
                "max": loss.max,
                "count": loss.count,
                "nonfinite": loss.nonfinite,
            }
        elif loss.nonfinite:
            out["loss"] = {"count": 0, "nonfinite": loss.nonfinite}
        if acc.first is not None:
            out["accuracy"] = {
                "initial": acc.first,
                "final": acc.last,
                "best": acc.max,
                "count": acc.count,
                "nonfinite": acc.nonfinite,
            }
        return out

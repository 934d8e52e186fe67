"""Loss and accuracy logging with constant memory and honest handling of NaN/inf."""

from __future__ import annotations

import logging
import math
from typing import Any

from codedag.monitor.spill import CsvSpill
from codedag.monitor.stats import Downsampler

log = logging.getLogger(__name__)

METRICS_CSV_HEADER = "metric,epoch,batch,value"
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

    Non-finite values (a diverging loss) are counted in ``nonfinite`` and kept in the raw CSV,
    never averaged into the series: JSON has no NaN and one NaN would poison every summary.

    Args:
        spill: CSV sink for every logged value (``metric,epoch,batch,value``).
        downsample_capacity: most points per metric kept in memory.
    """

    def __init__(self, spill: CsvSpill | None = None, downsample_capacity: int = 2048) -> None:
        self._spill = spill or CsvSpill(None, METRICS_CSV_HEADER)
        self.losses = _Track(downsample_capacity)
        self.accuracies = _Track(downsample_capacity)
        self._rows: list[tuple[bool, int, int, float]] = []  # (is_loss, epoch, batch, value)

    @staticmethod
    def _value(value: Any, what: str) -> float:
        try:
            return float(value)  # accepts python numbers, numpy scalars, 0-d tensors
        except (TypeError, ValueError) as error:
            from codedag.errors import ConfigError

            raise ConfigError(f"{what} must be a number, got {type(value).__name__}") from error

    def log_loss(self, epoch: int, batch: int, value: Any) -> None:
        """Record the loss of ``batch`` in ``epoch``."""
        self._rows.append((True, int(epoch), int(batch), self._value(value, "loss")))
        if len(self._rows) >= _BLOCK:
            self.fold()

    def log_accuracy(self, epoch: int, batch: int, value: Any) -> None:
        """Record the accuracy (a fraction or a percent, as the caller uses) of ``batch``."""
        self._rows.append((False, int(epoch), int(batch), self._value(value, "accuracy")))
        if len(self._rows) >= _BLOCK:
            self.fold()

    def fold(self) -> None:
        """Fold the values buffered on the training thread into the series and the raw CSV."""
        rows, self._rows = self._rows, []
        if not rows:
            return
        lines = []
        for is_loss, epoch, batch, value in rows:
            (self.losses if is_loss else self.accuracies).add(epoch, batch, value)
            lines.append(f"{'loss' if is_loss else 'accuracy'},{epoch},{batch},{value!r}")
        self._spill.write_lines(lines)

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

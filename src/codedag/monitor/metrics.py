"""Loss and accuracy logging with constant memory and honest handling of NaN/inf.

A logged value is a plain tuple appended to a :class:`collections.deque` on the training thread;
:meth:`MetricsLogger.fold` (the monitor's sampler thread, or the training thread every
``record_block`` values when nothing else folds) turns them into series and records, in order.
"""

from __future__ import annotations

import logging
import math
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from codedag.monitor.records import MetricRecord
from codedag.monitor.stats import Downsampler

log = logging.getLogger(__name__)

RECORD_BLOCK = 128  # values buffered before the training thread folds them itself (see Timer)
# A buffered value: name, epoch, batch, value, step, seconds since the mode started.
_Row = tuple[str, int, int, float, int, float]


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

    def add_many(self, keys: list[tuple[int, int]], values: list[float]) -> None:
        """Record a block of ``(epoch, batch)`` keys and their values, in order."""
        finite = [(k, v) for k, v in zip(keys, values) if math.isfinite(v)]
        self.nonfinite += len(values) - len(finite)
        if not finite:
            return
        kept_keys, kept = zip(*finite)
        if self.first is None:
            self.first = kept[0]
        self.last = kept[-1]
        self.min = min(self.min, *kept)
        self.max = max(self.max, *kept)
        self.series.add_many(kept_keys, kept)

    def points(self) -> list[list[float]]:
        return [[x[0], x[1], y] for x, y in self.series.points()]

    @property
    def count(self) -> int:
        return self.series.count


def _figures(track: _Track, **extremes: float | None) -> dict[str, Any]:
    """A metric's summary: its first and last value, the ``extremes`` named, its counts."""
    return {
        "initial": track.first,
        "final": track.last,
        **extremes,
        "count": track.count,
        "nonfinite": track.nonfinite,
    }


class MetricsLogger:
    """Records losses and accuracies as ``[(epoch, batch, value)]`` series.

    Non-finite values (a diverging loss) are counted in ``nonfinite`` and passed on to
    ``on_metrics`` (the raw CSV keeps them), never averaged into the series: JSON has no NaN and
    one NaN would poison every summary.

    Args:
        on_metrics: receives every logged value, in blocks.
        downsample_capacity: most points per metric kept in memory.
        record_block: values buffered before the training thread folds them itself.
    """

    __slots__ = ("_block", "_lock", "_on_metrics", "_rows", "accuracies", "losses")

    def __init__(
        self,
        on_metrics: Callable[[list[MetricRecord]], None] | None = None,
        downsample_capacity: int = 2048,
        record_block: int = RECORD_BLOCK,
    ) -> None:
        self._on_metrics = on_metrics
        self.losses = _Track(downsample_capacity)
        self.accuracies = _Track(downsample_capacity)
        self._rows: deque[_Row] = deque()
        self._block = max(1, int(record_block))
        self._lock = threading.RLock()

    def log(
        self, name: str, epoch: int, batch: int, value: object, step: int = -1, time_s: float = 0.0
    ) -> None:
        """Record ``value`` of metric ``name`` (``loss`` or ``accuracy``) for ``batch`` of
        ``epoch``; ``step`` and ``time_s``: the mode's step it belongs to and when."""
        try:
            number = float(value)  # type: ignore[arg-type]  # numbers, numpy scalars, 0-d tensors
        except (TypeError, ValueError) as error:
            from codedag.errors import ConfigError

            raise ConfigError(f"{name} must be a number, got {type(value).__name__}") from error
        rows = self._rows
        rows.append((name, int(epoch), int(batch), number, step, time_s))
        if len(rows) >= self._block:
            self.fold()

    def log_loss(
        self, epoch: int, batch: int, value: object, step: int = -1, time_s: float = 0.0
    ) -> None:
        """Record the loss of ``batch`` in ``epoch`` (see :meth:`log`)."""
        self.log("loss", epoch, batch, value, step, time_s)

    def log_accuracy(
        self, epoch: int, batch: int, value: object, step: int = -1, time_s: float = 0.0
    ) -> None:
        """Record the accuracy (a fraction or a percent, as the caller uses) of ``batch``."""
        self.log("accuracy", epoch, batch, value, step, time_s)

    def fold(self) -> None:
        """Fold the buffered values into the series and ``on_metrics``, in order; safe to call
        from any thread."""
        with self._lock:
            rows = self._rows
            count = len(rows)
            if not count:
                return
            pop, make = rows.popleft, tuple.__new__
            records = [make(MetricRecord, pop()) for _ in range(count)]
            for is_loss, track in ((True, self.losses), (False, self.accuracies)):
                mine = [r for r in records if (r.name == "loss") is is_loss]
                if mine:
                    track.add_many([(r.epoch, r.batch) for r in mine], [r.value for r in mine])
            if self._on_metrics is not None:
                self._on_metrics(records)

    def series(self) -> dict[str, list[list[float]]]:
        """``{"losses": [[epoch, batch, value]], "accuracies": [...]}`` (downsampled when long)."""
        with self._lock:
            self.fold()
            return {"losses": self.losses.points(), "accuracies": self.accuracies.points()}

    def strides(self) -> dict[str, int]:
        """Raw values per kept point for each series."""
        with self._lock:
            self.fold()
            return {
                "losses": self.losses.series.stride,
                "accuracies": self.accuracies.series.stride,
            }

    def summary(self) -> dict[str, Any]:
        """The results' ``loss`` and ``accuracy`` summaries; ``None`` where nothing was logged."""
        with self._lock:
            self.fold()
            return self._summary()

    def _summary(self) -> dict[str, Any]:
        out: dict[str, Any] = {"loss": None, "accuracy": None}
        loss, acc = self.losses, self.accuracies
        if loss.first is not None:
            out["loss"] = _figures(loss, min=loss.min, max=loss.max)
        elif loss.nonfinite:
            out["loss"] = {"count": 0, "nonfinite": loss.nonfinite}
        if acc.first is not None:
            out["accuracy"] = _figures(acc, best=acc.max)
        return out

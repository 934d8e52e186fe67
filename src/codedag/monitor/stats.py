"""Constant-memory statistics for long runs: running moments, quantiles and plot downsampling.

A run of 10^6 batches must not keep 10^6 Python floats alive. Everything here has memory bounded
by a constant that does not depend on the number of values recorded:

- ``RunningStats``: count, mean, standard deviation (Welford's update), min, max, sum.
- ``LogHistogram``: quantiles (p50, p95, ...) from log-spaced buckets; a reported quantile is
  within ``rel_error`` (0.5% by default) of the exact one, like an HDR histogram.
- ``Downsampler``: keeps at most ``capacity`` points for plots; when full, neighbouring buckets
  merge and the stride doubles, so the kept points always cover the whole run evenly.
"""

from __future__ import annotations

import math
import operator
from collections import Counter
from collections.abc import Sequence
from typing import Any


class RunningStats:
    """Count, sum, mean, population std, min and max of a stream, in O(1) memory."""

    __slots__ = ("_m2", "count", "max", "mean", "min", "total")

    def __init__(self) -> None:
        self.count = 0
        self.total = 0.0
        self.mean = 0.0
        self._m2 = 0.0
        self.min = math.inf
        self.max = -math.inf

    def add(self, value: float) -> None:
        """Record one value."""
        self.count += 1
        self.total += value
        delta = value - self.mean
        self.mean += delta / self.count
        self._m2 += delta * (value - self.mean)
        if value < self.min:
            self.min = value
        if value > self.max:
            self.max = value

    def add_many(self, values: Sequence[float]) -> None:
        """Record a block of values at once (Chan's combination of the block's moments)."""
        n = len(values)
        if not n:
            return
        total = sum(values)
        mean = total / n
        deviations = [v - mean for v in values]
        m2 = sum(map(operator.mul, deviations, deviations))
        count = self.count + n
        delta = mean - self.mean
        self.mean += delta * n / count
        self._m2 += m2 + delta * delta * self.count * n / count
        self.count = count
        self.total += total
        low, high = min(values), max(values)
        if low < self.min:
            self.min = low
        if high > self.max:
            self.max = high

    def without(self, values: list[float]) -> RunningStats:
        """A copy with ``values`` (recorded before) taken out again: count, sum, mean and std are
        exact (Welford's update reversed); min and max stay those of every value."""
        out = RunningStats()
        out.count, out.total, out.mean, out._m2 = self.count, self.total, self.mean, self._m2
        out.min, out.max = self.min, self.max
        for value in values:
            if out.count <= 1:
                out.count, out.total, out.mean, out._m2 = 0, 0.0, 0.0, 0.0
                continue
            out.count -= 1
            out.total -= value
            delta = value - out.mean
            out.mean -= delta / out.count
            out._m2 = max(0.0, out._m2 - delta * (value - out.mean))
        return out

    @property
    def std(self) -> float:
        """Population standard deviation (0.0 for fewer than two values)."""
        return math.sqrt(self._m2 / self.count) if self.count > 1 else 0.0

    def to_dict(self) -> dict[str, float | int]:
        """``{"count", "mean", "std", "min", "max", "sum"}``; zeros when nothing was recorded."""
        if self.count == 0:
            return {"count": 0, "mean": 0.0, "std": 0.0, "min": 0.0, "max": 0.0, "sum": 0.0}
        return {
            "count": self.count,
            "mean": self.mean,
            "std": self.std,
            "min": self.min,
            "max": self.max,
            "sum": self.total,
        }


class LogHistogram:
    """Approximate quantiles of positive values from log-spaced buckets.

    Bucket ``i`` holds values in ``[g**i, g**(i+1))`` with ``g = (1 + e) / (1 - e)``; the bucket's
    representative is within relative error ``e`` of every value in it. Values ``<= 0`` share one
    bucket whose representative is 0. Memory grows with the log of the value range only (about 2,300
    buckets span 1 ns to 1 hour at 0.5%).
    """

    __slots__ = ("_counts", "_inv_log_gamma", "_zero", "count", "gamma", "rel_error")

    def __init__(self, rel_error: float = 0.005) -> None:
        if not 0.0 < rel_error < 0.5:
            from codedag.errors import ConfigError

            raise ConfigError(f"rel_error must be in (0, 0.5), got {rel_error!r}")
        self.rel_error = rel_error
        self.gamma = (1.0 + rel_error) / (1.0 - rel_error)
        self._inv_log_gamma = 1.0 / math.log(self.gamma)
        self._counts: dict[int, int] = {}
        self._zero = 0
        self.count = 0

    def add(self, value: float) -> None:
        """Record one value."""
        self.count += 1
        if value <= 0.0:
            self._zero += 1
            return
        key = math.floor(math.log(value) * self._inv_log_gamma)
        counts = self._counts
        counts[key] = counts.get(key, 0) + 1

    def add_many(self, values: Sequence[float]) -> None:
        """Record a block of values at once."""
        inv, log, floor = self._inv_log_gamma, math.log, math.floor
        keys = Counter([floor(log(v) * inv) for v in values if v > 0.0])
        counts = self._counts
        for key, n in keys.items():
            counts[key] = counts.get(key, 0) + n
        self._zero += len(values) - keys.total()
        self.count += len(values)

    def without(self, values: list[float]) -> LogHistogram:
        """A copy with ``values`` (recorded before) taken out again."""
        out = LogHistogram(self.rel_error)
        out._counts, out._zero, out.count = dict(self._counts), self._zero, self.count
        for value in values:
            out.count -= 1
            if value <= 0.0:
                out._zero -= 1
                continue
            key = math.floor(math.log(value) * out._inv_log_gamma)
            out._counts[key] -= 1
            if not out._counts[key]:
                del out._counts[key]
        return out

    def quantile(self, q: float) -> float:
        """The ``q``-quantile (0 <= q <= 1), nearest-rank; 0.0 when empty."""
        if self.count == 0:
            return 0.0
        rank = max(1, math.ceil(q * self.count))
        seen = self._zero
        if seen >= rank:
            return 0.0
        for key in sorted(self._counts):
            seen += self._counts[key]
            if seen >= rank:
                # midpoint (in the relative-error sense) of [g**key, g**(key+1))
                return 2.0 * self.gamma**key * self.gamma / (self.gamma + 1.0)
        return 2.0 * self.gamma ** max(self._counts) * self.gamma / (self.gamma + 1.0)


class Downsampler:
    """Keep at most ``capacity`` bucket means of a series of ``(x, y...)`` points.

    Each kept point is ``[x of the bucket's first point, mean of each y]`` over ``stride`` raw
    points. ``stride`` starts at 1 (every point kept) and doubles whenever the buffer fills.
    """

    __slots__ = ("_acc", "_acc_n", "_acc_x", "_points", "capacity", "count", "stride", "width")

    def __init__(self, capacity: int = 2048, width: int = 1) -> None:
        if capacity < 2 or capacity % 2:
            from codedag.errors import ConfigError

            raise ConfigError(f"capacity must be an even integer >= 2, got {capacity!r}")
        self.capacity = capacity
        self.width = width
        self.stride = 1
        self.count = 0
        # kept points: [x, n, sum_y1, sum_y2, ...]
        self._points: list[list[Any]] = []
        self._acc_x: Any = None
        self._acc: list[float] = [0.0] * width
        self._acc_n = 0

    def add(self, x: object, *ys: float) -> None:
        """Record one point; ``len(ys)`` must equal ``width``."""
        self.count += 1
        if self.stride == 1:
            self._points.append([x, 1, *ys])
            if len(self._points) >= self.capacity:
                self._compact()
            return
        if self._acc_n == 0:
            self._acc_x = x
        acc = self._acc
        for i, y in enumerate(ys):
            acc[i] += y
        self._acc_n += 1
        if self._acc_n >= self.stride:
            self._close_bucket()

    def add_many(self, xs: Sequence[Any], *columns: Sequence[float]) -> None:
        """Record a block of points: ``xs[i]`` with ``columns[k][i]`` as its ``k``-th y."""
        i, n = 0, len(xs)
        while i < n:
            if self.stride == 1:
                take = min(self.capacity - len(self._points), n - i)
                parts = (c[i : i + take] for c in columns)
                self._points.extend([x, 1, *ys] for x, *ys in zip(xs[i : i + take], *parts))
                self.count += take
                i += take
                if len(self._points) >= self.capacity:
                    self._compact()
                continue
            if self._acc_n == 0:
                self._acc_x = xs[i]
            take = min(self.stride - self._acc_n, n - i)
            acc = self._acc
            for k, column in enumerate(columns):
                acc[k] += sum(column[i : i + take])
            self._acc_n += take
            self.count += take
            i += take
            if self._acc_n >= self.stride:
                self._close_bucket()

    def _close_bucket(self) -> None:
        """Keep the full bucket's point and start the next one."""
        self._points.append([self._acc_x, self._acc_n, *self._acc])
        self._acc = [0.0] * self.width
        self._acc_n = 0
        if len(self._points) >= self.capacity:
            self._compact()

    def _compact(self) -> None:
        merged: list[list[Any]] = []
        pts = self._points
        for i in range(0, len(pts) - 1, 2):
            a, b = pts[i], pts[i + 1]
            merged.append([a[0], a[1] + b[1], *(a[k] + b[k] for k in range(2, 2 + self.width))])
        if len(pts) % 2:
            merged.append(pts[-1])
        self._points = merged
        self.stride *= 2

    def points(self) -> list[list[Any]]:
        """The kept points as ``[x, mean_y1, ...]``, the partial last bucket included."""
        out = [[p[0], *(s / p[1] for s in p[2:])] for p in self._points]
        if self._acc_n:
            out.append([self._acc_x, *(s / self._acc_n for s in self._acc)])
        return out

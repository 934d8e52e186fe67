"""Samples of one way of doing something, summarized: median, quartiles, and the median's
standard error."""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

MEDIAN_SE_FACTOR = 1.2533
"""``sqrt(pi / 2)``: the standard error of a median of ``n`` samples is about this times
``sigma / sqrt(n)``."""

IQR_PER_SIGMA = 1.349
"""Interquartile range of a normal distribution in standard deviations."""


@dataclass(frozen=True)
class Timing:
    """Samples of one call, summarized (nanoseconds).

    Attributes:
        median_ns: median sample.
        q25_ns: first quartile.
        q75_ns: third quartile.
        samples: how many samples.
    """

    median_ns: int
    q25_ns: int
    q75_ns: int
    samples: int

    @property
    def iqr_ns(self) -> int:
        """Interquartile range: the spread of the samples."""
        return self.q75_ns - self.q25_ns

    @property
    def median_se_ns(self) -> float:
        """Standard error of the median, robustly from the quartiles (0 without samples).

        ``1.2533 * sigma / sqrt(n)``, with ``sigma`` estimated as ``IQR / 1.349``; with fewer
        than four samples the quartiles are the extremes, so the estimate errs on the large side.
        """
        if self.samples < 1:
            return 0.0
        return MEDIAN_SE_FACTOR * (self.iqr_ns / IQR_PER_SIGMA) / math.sqrt(self.samples)

    @property
    def relative_spread(self) -> float:
        """Interquartile range over the median (0 for a zero median)."""
        return self.iqr_ns / self.median_ns if self.median_ns > 0 else 0.0

    @classmethod
    def of(cls, samples_ns: Sequence[int]) -> Timing:
        """Summarize raw samples (at least one)."""
        ordered = sorted(samples_ns)
        if not ordered:
            raise ValueError("a timing needs at least one sample, got none")
        if len(ordered) >= 4:
            q25, _q50, q75 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q25, q75 = ordered[0], ordered[-1]
        return cls(int(statistics.median(ordered)), int(q25), int(q75), len(ordered))

    @classmethod
    def of_seconds(cls, samples_s: Sequence[float]) -> Timing:
        """Summarize samples given in seconds (kept to the nanosecond)."""
        return cls.of([round(s * 1e9) for s in samples_s])

    def to_dict(self) -> dict[str, int]:
        """Plain data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timing:
        """Inverse of :meth:`to_dict`.

        Raises:
            ValueError: a figure that no measurement gives (negative, NaN, infinite, not a whole
                number, quartiles around the median in the wrong order, no sample).
        """
        median, q25, q75 = (nanoseconds(data[k]) for k in ("median_ns", "q25_ns", "q75_ns"))
        samples = nanoseconds(data["samples"])
        if not q25 <= median <= q75 or samples < 1:
            raise ValueError(f"inconsistent timing {data!r}")
        return cls(median, q25, q75, samples)


def nanoseconds(value: object) -> int:
    """A whole number >= 0 read from a file (``3.0`` too; NaN, inf, negatives and booleans not).

    Raises:
        ValueError: anything else.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"expected a whole number >= 0, got {value!r}")
    if not math.isfinite(value) or value < 0 or value != int(value):
        raise ValueError(f"expected a whole number >= 0, got {value!r}")
    return int(value)

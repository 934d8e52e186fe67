"""Timing two ways of making the same call, side by side, with their spread.

The original and the migrated path are run interleaved (ABAB..., alternating which goes first) so
both see the same machine state; each keeps its own samples. Work on CUDA is asynchronous: the
device is synchronized before the clock starts and before it stops, so a sample is the whole call.
A :class:`Stopwatch` can be replaced in tests (injected noise, fake clocks).
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any


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

    @classmethod
    def of(cls, samples: list[int]) -> Timing:
        """Summarize raw samples (at least one)."""
        ordered = sorted(samples)
        if len(ordered) >= 4:
            q25, _q50, q75 = statistics.quantiles(ordered, n=4, method="inclusive")
        else:
            q25, q75 = ordered[0], ordered[-1]
        return cls(int(statistics.median(ordered)), int(q25), int(q75), len(ordered))

    def to_dict(self) -> dict[str, int]:
        """Plain data."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Timing:
        """Inverse of :meth:`to_dict`."""
        return cls(
            int(data["median_ns"]), int(data["q25_ns"]), int(data["q75_ns"]), int(data["samples"])
        )


def _no_sync() -> None:
    return None


class Stopwatch:
    """Times one call: ``sync(); t0; fn(); sync(); t1``.

    Args:
        sync: waits for queued device work (:func:`codedag.devices.torch_devices.device_sync` of
            the device).
        clock: nanosecond clock.
    """

    def __init__(
        self, sync: Callable[[], None] = _no_sync, clock: Callable[[], int] = time.perf_counter_ns
    ) -> None:
        self.sync = sync
        self.clock = clock

    def __call__(self, fn: Callable[[], Any]) -> int:
        """Nanoseconds one call of ``fn`` took."""
        sync, clock = self.sync, self.clock
        sync()
        t0 = clock()
        fn()
        sync()
        return clock() - t0


@dataclass(frozen=True)
class Budget:
    """How long to measure one pair.

    Sampling goes on until both ways have ``min_samples`` and together took ``target_ns``; then
    it stops as soon as the comparison is decided (the medians differ by more than twice the
    standard error of their difference, or that error is below ``precision`` of the original's
    median), at ``max_ns`` at the latest.

    Attributes:
        min_samples: samples of each way, at least.
        max_samples: samples of each way, at most.
        target_ns: time spent before the first check.
        max_ns: time spent at most (an undecided pair is reported with its spread).
        precision: relative standard error that counts as decided.
        warmup: untimed calls of each way first (allocations, caches, lazy initialization).
    """

    min_samples: int = 5
    max_samples: int = 201
    target_ns: int = 150_000_000
    max_ns: int = 2_000_000_000
    precision: float = 0.02
    warmup: int = 2


def difference_error_ns(a: Timing, b: Timing) -> float:
    """Twice the standard error of ``a.median - b.median`` (robust: from the quartiles).

    The standard error of a median of ``n`` samples is about ``1.2533 * sigma / sqrt(n)``, with
    ``sigma`` estimated as ``IQR / 1.349``.
    """
    variance = 0.0
    for timing in (a, b):
        if timing.samples:
            se = 1.2533 * (timing.iqr_ns / 1.349) / math.sqrt(timing.samples)
            variance += se * se
    return 2.0 * math.sqrt(variance)


def _decided(first: list[int], second: list[int], precision: float) -> bool:
    a, b = Timing.of(first), Timing.of(second)
    error = difference_error_ns(a, b)
    return abs(a.median_ns - b.median_ns) > error or error < precision * max(1, a.median_ns)


def time_pair(
    original: Callable[[], Any],
    backend: Callable[[], Any],
    stopwatch: Stopwatch | None = None,
    budget: Budget | None = None,
) -> tuple[Timing, Timing]:
    """Time ``original`` and ``backend`` interleaved; returns their timings.

    Exceptions of either call propagate (a call that cannot run has no time).
    """
    watch = stopwatch or Stopwatch()
    plan = budget or Budget()
    for _ in range(plan.warmup):
        original()
        backend()
    first: list[int] = []
    second: list[int] = []
    spent = 0
    for i in range(plan.max_samples):
        if i % 2:
            b = watch(backend)
            a = watch(original)
        else:
            a = watch(original)
            b = watch(backend)
        first.append(a)
        second.append(b)
        spent += a + b
        if i + 1 < plan.min_samples or spent < plan.target_ns:
            continue
        if spent >= plan.max_ns or _decided(first, second, plan.precision):
            break
    return Timing.of(first), Timing.of(second)


def time_one(fn: Callable[[], Any], stopwatch: Stopwatch | None = None, repeats: int = 7) -> Timing:
    """Time ``fn`` alone (after one warm-up call)."""
    watch = stopwatch or Stopwatch()
    fn()
    return Timing.of([watch(fn) for _ in range(repeats)])

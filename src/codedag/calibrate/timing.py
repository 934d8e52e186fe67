"""Calibration's use of :mod:`codedag.measure`: two ways of making the same call, side by side.

The original and the migrated path are timed by the measurement protocol (interleaved rounds
A B, B A, ..., warm-up first, the device synchronized around each sample) and summarized by
their medians and quartiles, the figures the calibration cache keeps. A :class:`Stopwatch` can
be replaced in tests (injected noise, fake clocks). A measurement that other work disturbed is
logged with the signs seen: its figures are kept, with the warning.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import codedag.measure.pair as pair
import codedag.measure.statistic as statistic
from codedag.measure.clock import Stopwatch
from codedag.measure.pair import Budget
from codedag.measure.summary import Timing

log = logging.getLogger(__name__)

__all__ = [
    "Budget",
    "Stopwatch",
    "Timing",
    "cpu_aware_stopwatch",
    "difference_error_ns",
    "time_one",
    "time_pair",
]


def cpu_aware_stopwatch(device: str, sync: Callable[[], None]) -> Stopwatch:
    """The stopwatch of calibration on ``device``: on the CPU it also reads the calling thread's
    CPU time, so a call that waited for the CPU is noticed (see
    :mod:`codedag.measure.interference`); on an accelerator the thread waits by nature."""
    cpu_clock = time.thread_time_ns if device.startswith("cpu") else None
    return Stopwatch(sync=sync, cpu_clock=cpu_clock)


def difference_error_ns(a: Timing, b: Timing) -> float:
    """The spread of ``a.median - b.median``: half-width of its 95 % interval
    (:func:`codedag.measure.statistic.difference_spread_ns`)."""
    return statistic.difference_spread_ns(a, b)


def time_pair(
    original: Callable[[], Any],
    backend: Callable[[], Any],
    stopwatch: Stopwatch | None = None,
    budget: Budget | None = None,
    what: str = "",
) -> tuple[Timing, Timing]:
    """Time ``original`` and ``backend`` interleaved; returns their timings.

    Args:
        original: the library call.
        backend: the migrated path.
        stopwatch: how one call is timed.
        budget: how long to sample.
        what: the call's name, for the warning when the measurement was disturbed.

    Exceptions of either call propagate (a call that cannot run has no time).
    """
    result = pair.time_pair(
        original, backend, stopwatch, budget, names=("the original", "the backend")
    )
    if result.interference.disturbed:
        log.warning(
            "timing %s was disturbed by other work (%s): its figures may be off; measure again "
            "on a quieter machine (--recalibrate)",
            what or "a call",
            result.interference.describe(),
        )
    return result.a, result.b


def time_one(fn: Callable[[], Any], stopwatch: Stopwatch | None = None, repeats: int = 7) -> Timing:
    """Time ``fn`` alone (after one warm-up call)."""
    return pair.time_one(fn, stopwatch, repeats)

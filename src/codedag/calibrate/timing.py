"""Calibration's use of :mod:`codedag.measure`: two ways of making the same call, side by side.

The original and the migrated path are timed by the measurement protocol (interleaved rounds
A B, B A, ..., warm-up first, the device synchronized around each sample) and summarized by
their medians and quartiles, the figures the calibration cache keeps. A :class:`Stopwatch` can
be replaced in tests (injected noise, fake clocks). A measurement that other work disturbed keeps
its figures with a warning. Inside :func:`summarized_disturbances` (a calibration run) the
disturbed measurements are counted and said in one line at its end, naming the first few
functions; each one's signs are logged at debug level.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
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
    "disturbance_summary",
    "pair_spread_ns",
    "record_dict",
    "summarized_disturbances",
    "time_one",
    "time_pair",
]


SUMMARY_NAMES = 3
"""Functions named in the one-line summary of disturbed measurements; the rest are counted."""

_disturbed: ContextVar[list[str] | None] = ContextVar("codedag_disturbed", default=None)


@contextlib.contextmanager
def summarized_disturbances() -> Iterator[list[str]]:
    """Within: disturbed measurements are collected (the yielded list of function names) and
    said in one warning when the outermost block ends, instead of one warning each."""
    outer = _disturbed.get()
    if outer is not None:  # an enclosing calibration says them all
        yield outer
        return
    names: list[str] = []
    token = _disturbed.set(names)
    try:
        yield names
    finally:
        _disturbed.reset(token)
        if names:
            log.warning("%s", disturbance_summary(names))


def disturbance_summary(names: list[str]) -> str:
    """One line for disturbed measurements of ``names`` (one entry per measurement)."""
    distinct = list(dict.fromkeys(names))
    shown = distinct[:SUMMARY_NAMES]
    more = len(distinct) - len(shown)
    if more > 0:
        shown.append(f"{more} more")
    listed = shown[0] if len(shown) == 1 else ", ".join(shown[:-1]) + " and " + shown[-1]
    count = len(names)
    return (
        f"{count} timing{'s' if count != 1 else ''} of {listed} disturbed by other work: "
        "their figures may be off; measure again on a quieter machine (--recalibrate)"
    )


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


def pair_spread_ns(a: Timing | None, b: Timing | None) -> int:
    """:func:`difference_error_ns` in whole nanoseconds; 0 unless both ways were timed."""
    if a is None or b is None:
        return 0
    return int(difference_error_ns(a, b))


def record_dict(record: Any) -> dict[str, Any]:
    """A measurement dataclass as plain data (the cache entry): its fields in order, timings as
    dicts, tuples as lists, without ``cached`` (where the figures came from, not a figure)."""
    return {
        f.name: _plain(getattr(record, f.name))
        for f in dataclasses.fields(record)
        if f.name != "cached"
    }


def _plain(value: Any) -> Any:
    if isinstance(value, Timing):
        return value.to_dict()
    return list(value) if isinstance(value, tuple) else value


def time_pair(
    original: Callable[[], Any],
    backend: Callable[[], Any],
    stopwatch: Stopwatch | None = None,
    budget: Budget | None = None,
    what: str = "",
    function: str = "",
) -> tuple[Timing, Timing]:
    """Time ``original`` and ``backend`` interleaved; returns their timings.

    Args:
        original: the library call.
        backend: the migrated path.
        stopwatch: how one call is timed.
        budget: how long to sample.
        what: the call's name, for the warning when the measurement was disturbed.
        function: the function measured, for the summary of disturbed measurements (default:
            ``what``).

    Exceptions of either call propagate (a call that cannot run has no time).
    """
    result = pair.time_pair(
        original, backend, stopwatch, budget, names=("the original", "the backend")
    )
    if result.interference.disturbed:
        collected = _disturbed.get()
        if collected is None:
            log.warning(
                "timing %s was disturbed by other work (%s): its figures may be off; measure "
                "again on a quieter machine (--recalibrate)",
                what or "a call",
                result.interference.describe(),
            )
        else:
            collected.append(function or what or "a call")
            log.debug(
                "timing %s was disturbed by other work (%s)",
                what or "a call",
                result.interference.describe(),
            )
    return result.a, result.b


def time_one(fn: Callable[[], Any], stopwatch: Stopwatch | None = None, repeats: int = 7) -> Timing:
    """Time ``fn`` alone (after one warm-up call)."""
    return pair.time_one(fn, stopwatch, repeats)

"""Timing one call: an injected clock and an injected device synchronization.

Work on an accelerator is asynchronous: ``sync()`` waits for queued work before the clock starts
and before it stops, so a sample is the whole call, not its launch. This package knows no device:
the caller passes the device's synchronization (default: none).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

T = TypeVar("T")

Clock = Callable[[], int]
"""A nanosecond clock (``time.perf_counter_ns``; tests inject fake ones)."""

Sync = Callable[[], None]
"""Waits for a device's queued work (``torch.cuda.synchronize`` on CUDA)."""


def no_sync() -> None:
    """The synchronization of a device that runs calls synchronously (the CPU): nothing."""


@dataclass(frozen=True)
class Timed(Generic[T]):
    """What one timed call returned and how long it took.

    Attributes:
        value: the call's result.
        elapsed_ns: wall time from before the call to after it (device work included).
        cpu_ns: CPU time of the calling thread meanwhile (``None`` without a CPU clock).
    """

    value: T
    elapsed_ns: int
    cpu_ns: int | None = None


class Stopwatch:
    """Times one call: ``sync(); t0; fn(); sync(); t1``.

    Args:
        sync: waits for queued device work (default: nothing to wait for).
        clock: nanosecond wall clock.
        cpu_clock: nanosecond CPU clock of the calling thread (``time.thread_time_ns``); when
            given, samples also record the CPU time, which tells a call that computed from one
            that waited for the CPU (see :mod:`.interference`).
    """

    def __init__(
        self,
        sync: Sync = no_sync,
        clock: Clock = time.perf_counter_ns,
        cpu_clock: Clock | None = None,
    ) -> None:
        self.sync = sync
        self.clock = clock
        self.cpu_clock = cpu_clock

    def __call__(self, fn: Callable[[], Any]) -> int:
        """Nanoseconds one call of ``fn`` took."""
        sync, clock = self.sync, self.clock
        sync()
        t0 = clock()
        fn()
        sync()
        return clock() - t0

    def timed(self, fn: Callable[[], T]) -> Timed[T]:
        """One call of ``fn``: its result, wall time and (with a CPU clock) CPU time.

        Exceptions of ``fn`` propagate.
        """
        sync, clock, cpu_clock = self.sync, self.clock, self.cpu_clock
        sync()
        c0 = cpu_clock() if cpu_clock is not None else 0
        t0 = clock()
        value = fn()
        sync()
        t1 = clock()
        cpu = cpu_clock() - c0 if cpu_clock is not None else None
        return Timed(value, t1 - t0, cpu)

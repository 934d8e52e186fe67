"""Measure the tracer's unmeasured per-event cost, once per process and memory setting.

The hook times its own work on every recorded event and that time is subtracted exactly. What it
cannot time is the interpreter invoking the hook (and a wrapper's own frame), and skipped events,
which are not timed to keep them cheap. Those costs are measured here by tracing small loops whose
untraced duration is known: per skipped event, and per recorded Python call, wrapped call and
C call. The median over a few repetitions is kept (robust to preemption).
"""

from __future__ import annotations

import statistics
import threading
import time
from collections.abc import Callable
from typing import Any

from codedag.trace.costs import ZERO, Calibration
from codedag.trace.filter import FunctionFilter
from codedag.trace.value_nodes import DataTypes

__all__ = ["ZERO", "Calibration", "calibration"]

_N = 150
_REPEATS = 5
_cache: dict[tuple[bool, bool, bool], Calibration] = {}
_lock = threading.Lock()


def _leaf() -> None:
    return None


def _kept_parent(n: int) -> None:
    for _ in range(n):
        _leaf()


def _skipped_leaf() -> None:
    return None


def _skip_parent(n: int) -> None:
    for _ in range(n):
        _skipped_leaf()  # codedag's own code: never recorded (sys.monitoring: switched off)


def _wrapped_parent(n: int, fn: Any) -> None:
    for _ in range(n):
        fn(1)


def _c_parent(n: int, fn: Any) -> None:
    for _ in range(n):
        fn()


def _lines_parent(n: int) -> None:
    total = 0
    for i in range(n):
        total = i
    del total


_CODES = frozenset(
    f.__code__
    for f in (_leaf, _kept_parent, _skip_parent, _wrapped_parent, _c_parent, _lines_parent)
)


def _untraced(fn: Any, *args: Any) -> int:
    best = None
    for _ in range(3):
        t0 = time.thread_time_ns()
        fn(*args)
        dt = time.thread_time_ns() - t0
        best = dt if best is None else min(best, dt)
    return best or 0


def _once(track_memory: bool, line_level: bool) -> Calibration:
    import numpy

    from codedag.trace.interpose import make_wrapper
    from codedag.trace.recorder import Session
    from codedag.trace.records import NAME, NL0, NL1, OV0, OV1, SKIP0, SKIP1

    wrapped = make_wrapper("codedag.calibration.abs", "codedag.calibration", abs)
    c_fn = numpy.zeros(1).item  # a bound C method the filter records as numpy.ndarray.item
    cases: list[tuple[Callable[..., Any], tuple[Any, ...]]] = [
        (_skip_parent, (_N,)),
        (_lines_parent, (_N,)),
        (_kept_parent, (_N,)),
        (_wrapped_parent, (_N, wrapped)),
        (_c_parent, (_N, c_fn)),
    ]
    base = [_untraced(fn, *args) for fn, args in cases]
    session = Session(
        FunctionFilter(), 3, track_memory, DataTypes(), user_codes=_CODES, line_level=line_level
    )
    # Each case is timed with this thread's CPU time: the costs are CPU work, and a busy
    # machine's preemption, which wall-clock loops would count, does not inflate it. The hook's
    # own time inside is read from the records (the clock real windows use).
    cpu: list[int] = []
    session.start()
    try:
        for fn, args in cases:
            c0 = time.thread_time_ns()
            fn(*args)
            cpu.append(time.thread_time_ns() - c0)
    finally:
        session.stop()
    parents = [r for r in session.calls if r[NAME].endswith("_parent")]
    if len(parents) != len(cases):  # the hook was disturbed (e.g. a debugger): no correction
        return ZERO
    extra, skipped, lines = [], [], []
    for rec, traced, untraced in zip(parents, cpu, base):
        extra.append(traced - (rec[OV1] - rec[OV0]) - untraced)
        skipped.append(rec[SKIP1] - rec[SKIP0])
        lines.append(rec[NL1] - rec[NL0])
    # skipped events and line events of the first two cases: two equations, two unknowns
    (a1, b1, e1), (a2, b2, e2) = (skipped[0], lines[0], extra[0]), (skipped[1], lines[1], extra[1])
    det = a1 * b2 - a2 * b1
    if a1 < _N // 4:  # skipped events switched off after their first (sys.monitoring)
        skip_ns, line_ns = 0.0, (e2 / b2 if b2 else 0.0)
    elif b1 == 0 and b2 == 0:
        skip_ns, line_ns = e1 / max(1, a1), 0.0
    elif det:
        skip_ns, line_ns = (e1 * b2 - e2 * b1) / det, (a1 * e2 - a2 * e1) / det
    else:
        return ZERO
    skip_ns, line_ns = max(0.0, skip_ns), max(0.0, line_ns)
    kept = [
        max(0.0, (extra[i] - skipped[i] * skip_ns - lines[i] * line_ns) / _N) for i in (2, 3, 4)
    ]
    return Calibration(skip_ns, kept[0], kept[1], kept[2], line_ns)


def calibration(track_memory: bool, line_level: bool = False) -> Calibration:
    """The cached calibration for this memory mode and line-level setting (measured on first
    use, ~0.04-0.1 s)."""
    import tracemalloc

    # the memory mode and line events (sys.settrace) change the costs
    key = (track_memory, tracemalloc.is_tracing(), line_level)
    with _lock:
        hit = _cache.get(key)
        if hit is None:
            runs = [_once(track_memory, line_level) for _ in range(_REPEATS)]
            # A busy machine preempts some runs for a scheduler tick (milliseconds): inside the
            # hook that lowers a run's figures, elsewhere it raises them. The median of each
            # figure ignores both.
            hit = Calibration(
                *(
                    statistics.median(getattr(r, f) for r in runs)
                    for f in Calibration.__dataclass_fields__
                )
            )
            _cache[key] = hit
        return hit

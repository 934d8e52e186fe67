"""Measure the tracer's unmeasured per-event cost, once per process and memory setting.

The hook times its own work on every recorded event and that time is subtracted exactly. What it
cannot time is the interpreter invoking the hook (and a wrapper's own frame), and skipped events,
which are not timed to keep them cheap. Those costs are measured here by tracing small loops whose
untraced duration is known: per skipped event, and per recorded Python call, wrapped call and
C call. The minimum over a few repetitions is kept (interruptions only add time).
"""

from __future__ import annotations

import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

from codedag.trace.filter import FunctionFilter
from codedag.trace.values import DataTypes

_N = 300
_REPEATS = 5
_cache: dict[tuple[bool, bool], Calibration] = {}
_lock = threading.Lock()


@dataclass(frozen=True)
class Calibration:
    """Unmeasured cost per event in ns: skipped event, and recorded call by kind."""

    skip_ns: float = 0.0
    kept_py_ns: float = 0.0
    kept_wrapped_ns: float = 0.0
    kept_c_ns: float = 0.0

    def to_dict(self) -> dict[str, float]:
        """Plain data for the DAG's metadata."""
        return {k: round(v, 1) for k, v in asdict(self).items()}


ZERO = Calibration()


def _leaf() -> None:
    return None


def _kept_parent(n: int) -> None:
    for _ in range(n):
        _leaf()


def _skip_parent(n: int) -> None:
    for _ in range(n):
        len(())


def _wrapped_parent(n: int, fn: Any) -> None:
    for _ in range(n):
        fn(1)


def _c_parent(n: int, fn: Any) -> None:
    for _ in range(n):
        fn()


_CODES = frozenset(
    f.__code__ for f in (_leaf, _kept_parent, _skip_parent, _wrapped_parent, _c_parent)
)


def _untraced(fn: Any, *args: Any) -> int:
    best = None
    for _ in range(3):
        t0 = time.perf_counter_ns()
        fn(*args)
        dt = time.perf_counter_ns() - t0
        best = dt if best is None else min(best, dt)
    return best or 0


def _once(track_memory: bool) -> Calibration:
    import numpy

    from codedag.trace.interpose import make_wrapper
    from codedag.trace.recorder import Session

    wrapped = make_wrapper("codedag.calibration.abs", "codedag.calibration", abs)
    c_fn = numpy.zeros(1).item  # a bound C method the filter records as numpy.ndarray.item
    cases = [
        (_skip_parent, (_N,)),
        (_kept_parent, (_N,)),
        (_wrapped_parent, (_N, wrapped)),
        (_c_parent, (_N, c_fn)),
    ]
    base = [_untraced(fn, *args) for fn, args in cases]
    session = Session(FunctionFilter(), 3, track_memory, DataTypes(), user_codes=_CODES)
    session.start()
    try:
        for fn, args in cases:
            fn(*args)
    finally:
        session.stop()
    from codedag.trace.records import NAME, OV0, OV1, SKIP0, SKIP1, T0, T1

    parents = [r for r in session.calls if r[NAME].endswith("_parent")]
    if len(parents) != len(cases):  # the hook was disturbed (e.g. a debugger): no correction
        return ZERO
    extra = []
    skipped = []
    for rec, untraced in zip(parents, base):
        extra.append(rec[T1] - rec[T0] - (rec[OV1] - rec[OV0]) - untraced)
        skipped.append(rec[SKIP1] - rec[SKIP0])
    skip_ns = max(0.0, extra[0] / max(1, skipped[0]))
    kept = [max(0.0, (extra[i] - skipped[i] * skip_ns) / _N) for i in (1, 2, 3)]
    return Calibration(skip_ns, kept[0], kept[1], kept[2])


def calibration(track_memory: bool) -> Calibration:
    """The cached calibration for this memory mode (measured on first use, ~0.1-0.3 s)."""
    import tracemalloc

    key = (track_memory, tracemalloc.is_tracing())  # the memory mode changes the costs
    with _lock:
        hit = _cache.get(key)
        if hit is None:
            runs = [_once(track_memory) for _ in range(_REPEATS)]
            # preemption on a busy machine only ever adds time: the least disturbed run is best
            hit = Calibration(
                *(min(getattr(r, f) for r in runs) for f in Calibration.__dataclass_fields__)
            )
            _cache[key] = hit
        return hit

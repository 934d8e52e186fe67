"""Measure the tracer's unmeasured per-event cost, once per process and memory setting.

The hook times its own work on every recorded event and that time is subtracted exactly. What it
cannot time is the interpreter invoking the hook (and a wrapper's own frame), and skipped events,
which are not timed to keep them cheap. Those costs are measured here by tracing small loops whose
untraced duration is known: per skipped event, and per recorded Python call, wrapped call and
C call. The median over a few repetitions is kept (robust to preemption).

Measuring takes 0.05-0.1 s, most of what tracing a few samples costs, so each measurement is
kept in ``tracer_costs.json`` in the user cache directory (``$CODEDAG_CACHE_DIR``), keyed by the
interpreter, codedag's version, the CPU model, the event source and the setting, and read back by
later processes. The file only saves time and is read as hostile: a link, another user's file, a
file over 1 MiB or not JSON is not read, an entry that is not five finite costs between 0 and 1
ms is measured again and replaced, and a file that cannot be written is left as it is.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import platform
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeGuard

from codedag.errors import CodeDAGError
from codedag.trace.costs import ZERO, Calibration
from codedag.trace.filter import FunctionFilter
from codedag.trace.value_nodes import DataTypes
from codedag.util.io import atomic_write_json, parse_json_bytes
from codedag.util.paths import user_cache_dir

__all__ = ["ZERO", "Calibration", "calibration"]

log = logging.getLogger(__name__)

_N = 150
_REPEATS = 5
_cache: dict[tuple[bool, bool, bool], Calibration] = {}
_lock = threading.Lock()

COSTS_FILE = "tracer_costs.json"
_MAX_COST_NS = 1e6
"""A cost per event above 1 ms is no measurement of this hook: such an entry is measured again."""
_MAX_FILE_BYTES = 1 << 20
_FIELDS = tuple(f.name for f in dataclasses.fields(Calibration))


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
            saved_as = _entry_key(key)
            hit = _saved(saved_as)
            if hit is None:
                runs = [_once(track_memory, line_level) for _ in range(_REPEATS)]
                # A busy machine preempts some runs for a scheduler tick (milliseconds): inside
                # the hook that lowers a run's figures, elsewhere it raises them. The median of
                # each figure ignores both.
                hit = Calibration(
                    *(statistics.median(getattr(r, f) for r in runs) for f in _FIELDS)
                )
                _save(saved_as, hit)
            _cache[key] = hit
        return hit


def costs_path() -> Path:
    """``tracer_costs.json`` in the user cache directory."""
    return user_cache_dir() / COSTS_FILE


def _entry_key(key: tuple[bool, bool, bool]) -> str:
    """The file's key of the costs of setting ``key`` on this interpreter, codedag and CPU."""
    from codedag.devices.cpus import cpu_model
    from codedag.trace.monitoring import tool_available
    from codedag.version import __version__

    # sys.monitoring taken by a debugger or coverage tool: the setprofile costs, measured apart
    events = "sys.monitoring" if tool_available() else "sys.setprofile"
    where = [sys.implementation.name, platform.python_version(), __version__, cpu_model(), events]
    return hashlib.sha1(json.dumps([*where, list(key)]).encode()).hexdigest()


def _sound(entry: object) -> TypeGuard[dict[str, float]]:
    return (
        isinstance(entry, dict)
        and set(entry) == set(_FIELDS)
        and all(
            isinstance(v, int | float)
            and not isinstance(v, bool)
            and math.isfinite(v)
            and 0 <= v <= _MAX_COST_NS
            for v in entry.values()
        )
    )


def _entries() -> dict[str, Any]:
    """The file's entries, or none when it is missing, unreadable or not ours (a link, another
    user's, too large, not JSON)."""
    from codedag.store.trust import read_own_file

    path = costs_path()
    try:
        raw, _info = read_own_file(path, _MAX_FILE_BYTES)
        data = parse_json_bytes(raw, f"tracer costs {path}")
    except (CodeDAGError, OSError):  # measured again, rewritten
        return {}
    entries = data.get("entries") if isinstance(data, dict) else None
    return entries if isinstance(entries, dict) else {}


def _saved(entry_key: str) -> Calibration | None:
    entry = _entries().get(entry_key)
    return Calibration(**{f: float(entry[f]) for f in _FIELDS}) if _sound(entry) else None


def _save(entry_key: str, costs: Calibration) -> None:
    # read again: another process may have kept the costs of another setting meanwhile
    entries = {k: v for k, v in _entries().items() if _sound(v)}
    entries[entry_key] = dataclasses.asdict(costs)
    try:
        atomic_write_json(costs_path(), {"entries": entries}, indent=None)
    except (CodeDAGError, OSError) as error:  # it only saves time
        log.debug("tracer costs not saved in %s: %s", costs_path(), error)

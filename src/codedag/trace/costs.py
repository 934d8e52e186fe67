"""Cost accounting: the tracer's own time, each call's memory, and total and self times.

While a window is open, :class:`Meter` counts what the tracer itself costs (the time its hooks
measure around their work, the events they skip, the line events they see) and a memory meter
(:class:`PerCallMemory` or :class:`WindowMemory`) measures each call's memory. Records keep these
counters as they open and close; after the window :class:`CostModel` turns them into total and
self times with the tracer's cost subtracted: measured hook time exactly, the unmeasured rest
with the calibrated per-event costs (:class:`Calibration`, measured by
:mod:`codedag.trace.overhead`).
"""

from __future__ import annotations

import time
import tracemalloc
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Protocol

from codedag.trace.records import (
    CUR0,
    INFO,
    KIND,
    KIND_C,
    KIND_PY,
    KIND_STEP,
    KIND_WRAPPED,
    MEM,
    MEMORY_PER_CALL,
    MEMORY_WINDOW,
    NL0,
    NL1,
    OV0,
    OV1,
    OWN0,
    PARENT,
    PEAK,
    SEQ,
    SKIP0,
    SKIP1,
    T0,
    T1,
)


class Meter:
    """The tracer's own costs in one window, as running counters.

    Attributes:
        clock: the clock of every timestamp (nanoseconds).
        overhead_ns: time the hooks measured around their own work.
        skipped: events the hooks saw and did not record (not timed: calibrated).
        lines: line events of followed user frames (not timed: calibrated).
        calls: records opened.
    """

    __slots__ = ("calls", "clock", "lines", "overhead_ns", "skipped")

    def __init__(self, clock: Callable[[], int] = time.perf_counter_ns) -> None:
        self.clock = clock
        self.overhead_ns = 0
        self.skipped = 0
        self.lines = 0
        self.calls = 0

    def charge(self, h0: int, t: int = 0) -> int:
        """Add the time from ``h0`` to ``t`` (default: now) to the tracer's own; return the
        new total."""
        self.overhead_ns += (t or self.clock()) - h0
        return self.overhead_ns


class MemoryMeter(Protocol):
    """How the memory of each recorded call is measured (see ``MEMORY_*`` in records.py).

    A record is opened with :meth:`push` and closed with :meth:`measure` (before the
    tracer's bookkeeping) and :meth:`settle` (after it left the stack). :meth:`mark` and
    :meth:`own` bracket the tracer's own allocations.
    """

    def mark(self) -> int: ...

    def own(self, m0: int) -> None: ...

    def push(self, rec: list[Any], stack: list[list[Any]], m0: int) -> None: ...

    def measure(self, rec: list[Any]) -> int: ...

    def settle(self, rec: list[Any], stack: list[list[Any]], net: int) -> None: ...


class PerCallMemory:
    """A tracemalloc session of its own around each recorded C-level call (``per_call``).

    Python code runs untraced in between; a Python call reports the peak its callees imply
    (the running sum of the bytes they kept plus the largest callee peak on top of it).
    """

    def mark(self) -> int:
        """Nothing to bracket: the tracer's allocations are never traced."""
        return 0

    def own(self, m0: int) -> None:
        """Nothing to subtract (see :meth:`mark`)."""

    def push(self, rec: list[Any], stack: list[list[Any]], m0: int) -> None:
        """Open ``rec``: a C-level call starts its own tracemalloc session."""
        stack.append(rec)
        if rec[KIND] != KIND_PY:
            if tracemalloc.is_tracing():  # nested in another C call's session: net growth only
                rec[CUR0] = tracemalloc.get_traced_memory()[0]
            else:
                rec[CUR0] = -1
                tracemalloc.start(1)

    def measure(self, rec: list[Any]) -> int:
        """Close ``rec``'s measurement: set its peak (``MEM``); return the bytes it kept."""
        if rec[KIND] == KIND_PY:  # implied by the callees
            mem, net = rec[PEAK], rec[OWN0]
        elif rec[CUR0] == -1:
            net, mem = tracemalloc.get_traced_memory()
            tracemalloc.stop()
        else:
            net = mem = max(0, tracemalloc.get_traced_memory()[0] - rec[CUR0])
        rec[MEM] = mem
        return net

    def settle(self, rec: list[Any], stack: list[list[Any]], net: int) -> None:
        """Carry ``rec``'s peak and kept bytes to its caller."""
        if stack:
            parent = stack[-1]
            if parent[OWN0] + rec[MEM] > parent[PEAK]:
                parent[PEAK] = parent[OWN0] + rec[MEM]
            parent[OWN0] += net


class WindowMemory:
    """tracemalloc already runs (``window``): every call reads and resets the peak, which is
    carried up the stack; the tracer's own allocations are measured and subtracted."""

    def __init__(self) -> None:
        self.own_bytes = 0  # traced memory the tracer itself allocated

    def mark(self) -> int:
        """Traced bytes now, before the tracer's own work."""
        return tracemalloc.get_traced_memory()[0]

    def own(self, m0: int) -> None:
        """Count what the tracer allocated since :meth:`mark` returned ``m0``."""
        self.own_bytes += tracemalloc.get_traced_memory()[0] - m0

    def push(self, rec: list[Any], stack: list[list[Any]], m0: int) -> None:
        """Open ``rec`` at the current traced memory; carry the peak so far to its caller."""
        cur, peak = tracemalloc.get_traced_memory()
        self.own_bytes += cur - m0
        rec[OWN0] = self.own_bytes
        tracemalloc.reset_peak()
        if stack and peak > stack[-1][PEAK]:
            stack[-1][PEAK] = peak
        rec[CUR0] = rec[PEAK] = cur
        stack.append(rec)

    def measure(self, rec: list[Any]) -> int:
        """Nothing before the bookkeeping (see :meth:`settle`)."""
        return 0

    def settle(self, rec: list[Any], stack: list[list[Any]], net: int) -> None:
        """``rec``'s peak above its start, less the tracer's allocations meanwhile."""
        peak = max(rec[PEAK], tracemalloc.get_traced_memory()[1])
        rec[MEM] = max(0, peak - rec[CUR0] - (self.own_bytes - rec[OWN0]))
        if stack and peak > stack[-1][PEAK]:
            stack[-1][PEAK] = peak


def memory_meter(mode: str) -> MemoryMeter | None:
    """The meter of a memory mode (None: memory is not measured)."""
    if mode == MEMORY_PER_CALL:
        return PerCallMemory()
    if mode == MEMORY_WINDOW:
        return WindowMemory()
    return None


@dataclass(frozen=True)
class Calibration:
    """Unmeasured cost per event in ns: skipped event, recorded call by kind, line event."""

    skip_ns: float = 0.0
    kept_py_ns: float = 0.0
    kept_wrapped_ns: float = 0.0
    kept_c_ns: float = 0.0
    line_ns: float = 0.0

    def to_dict(self) -> dict[str, float]:
        """Plain data for the DAG's metadata."""
        return {k: round(v, 1) for k, v in asdict(self).items()}

    def per_record(self, kind: int) -> float:
        """The unmeasured cost of recording one call of ``kind`` (steps cost nothing)."""
        if kind == KIND_PY:
            return self.kept_py_ns
        if kind == KIND_WRAPPED:
            return self.kept_wrapped_ns
        if kind == KIND_C:
            return self.kept_c_ns
        return 0.0


ZERO = Calibration()


class CostModel:
    """Total and self times of a window's records, the tracer's own cost subtracted.

    A call's total is never below the sum of its callees' totals, so ``self_ns >= 0``. A
    statement's time outside the calls it made is shared by its steps in proportion to the
    bytes they produced, within what its frame has left.

    Args:
        calibration: the unmeasured per-event costs.
    """

    def __init__(self, calibration: Calibration) -> None:
        self.calibration = calibration

    def own(self, rec: list[Any]) -> float:
        """A record's time from its timestamps, less the tracer's cost inside it."""
        cal = self.calibration
        return (
            rec[T1]
            - rec[T0]
            - (rec[OV1] - rec[OV0])
            - (rec[SKIP1] - rec[SKIP0]) * cal.skip_ns
            - (rec[NL1] - rec[NL0]) * cal.line_ns
        )

    def times(self, calls: list[list[Any]], weights: dict[int, int]) -> tuple[list[int], list[int]]:
        """``(totals, selfs)`` of ``calls`` in ns, by index; ``weights`` are the bytes each
        step produced (by step sequence number)."""
        per_record = self.calibration.per_record
        n = len(calls)
        index_of = {rec[SEQ]: i for i, rec in enumerate(calls)}
        totals = [0] * n
        child_sum = [0] * n
        desc_cost = [0.0] * n  # unmeasured cost of the recorded calls nested inside each record
        steps_of: dict[int, list[int]] = {}
        for i, rec in enumerate(calls):
            if rec[KIND] == KIND_STEP:
                parent = index_of.get(rec[PARENT])
                if parent is not None:
                    steps_of.setdefault(parent, []).append(i)
        for i in range(n - 1, -1, -1):
            rec = calls[i]
            if rec[KIND] == KIND_STEP:
                continue
            own = self.own(rec)
            if i in steps_of:
                available = max(0, int(own - desc_cost[i]) - child_sum[i])
                steps = steps_of[i]
                shares = self._step_times(calls, steps, totals, desc_cost, index_of, weights)
                scale = min(1.0, available / sum(shares)) if sum(shares) else 0.0
                for j, share in zip(steps, shares):
                    totals[j] = int(share * scale)
                    child_sum[i] += totals[j]
            total = max(int(own - desc_cost[i]), child_sum[i], 0)
            totals[i] = total
            parent = index_of.get(rec[PARENT])
            if parent is not None:
                child_sum[parent] += total
                desc_cost[parent] += desc_cost[i] + per_record(rec[KIND])
        return totals, [totals[i] - child_sum[i] for i in range(n)]

    def _step_times(
        self,
        calls: list[list[Any]],
        steps: list[int],
        totals: list[int],
        desc_cost: list[float],
        index_of: dict[int, int],
        weights: dict[int, int],
    ) -> list[float]:
        """Time of each step: its statement's time outside recorded calls, shared by weight."""
        per_record = self.calibration.per_record
        by_unit: dict[Any, list[int]] = {}
        for j in steps:
            by_unit.setdefault(calls[j][INFO][0], []).append(j)
        out = dict.fromkeys(steps, 0.0)
        for members in by_unit.values():
            rec = calls[members[0]]
            own = self.own(rec)
            for sibling in rec[INFO][1]:
                k = index_of.get(sibling)
                if k is not None:
                    own -= totals[k] + desc_cost[k] + per_record(calls[k][KIND])
            own = max(0.0, own)
            weight = [weights.get(calls[j][SEQ], 0) for j in members]
            total_weight = sum(weight)
            for j, w in zip(members, weight):
                out[j] = own * (w / total_weight if total_weight else 1 / len(members))
        return [out[j] for j in steps]

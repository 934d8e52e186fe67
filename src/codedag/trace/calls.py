"""Call records: what the hooks do with a call that passed the filter and the stack checks.

:class:`CallRecorder` opens a record when a call starts (its arguments captured, its data values
used), closes it when the call returns (its result becomes a value node, its memory and the
tracer's counters are noted) and stops recording Python functions that never touch data. The
event sources (:mod:`codedag.trace.hooks`, :mod:`codedag.trace.monitoring`) decide what to
record; nothing here builds graph objects.

The tracer times its own work around every recorded event (two clock reads) so it can be
subtracted; skipped events only increment a counter.
"""

from __future__ import annotations

import bisect
import gc
import types
from dataclasses import dataclass
from typing import Any

from codedag.backends.names import shared_wrapper_ids
from codedag.trace.capture import SCALAR_TYPES, ArgumentCapture
from codedag.trace.classify import Classifier
from codedag.trace.costs import MemoryMeter, Meter
from codedag.trace.identity import ValueTracker
from codedag.trace.lines import LineFollower
from codedag.trace.records import (
    ARG_SCALAR,
    ARG_TYPE,
    ARG_VALUE,
    DATA,
    DEPTH,
    FRAME,
    INFO,
    KIND,
    KIND_C,
    KIND_PY,
    KIND_WRAPPED,
    LINES,
    N1,
    NAME,
    NL0,
    NL1,
    OV0,
    OV1,
    RET,
    SEQ,
    SITE,
    SKIP0,
    SKIP1,
    T0,
    T1,
    has_data,
    step_record,
)
from codedag.trace.session_state import SessionState
from codedag.trace.value_nodes import MAX_CONTAINER_SCAN, describe

_CONTAINERS = (tuple, list, dict)

_WRAPPERS = shared_wrapper_ids()
"""Codes of decorators' wrappers of several library functions, whose frames are not recorded."""


def _same_shape(obj: Any, shape: Any) -> bool:
    """Whether ``obj`` still has the shape it was recorded with (``describe``'s shape)."""
    cls = type(obj)
    if cls.__name__ == "ndarray" and cls.__module__ == "numpy":  # the common case, cheaply
        return bool(obj.shape == shape)
    return bool(describe(obj)[2] == shape)


def _seq(record: list[Any]) -> int:
    return int(record[SEQ])


@dataclass(eq=False, repr=False)
class CallRecorder:
    """Opens and closes the call records of one window.

    Args:
        state: the window's records, stack and configuration.
        meter: the tracer's own costs.
        tracker: values by identity.
        capture: arguments into record entries.
        classifier: entries by code object (a function no longer recorded gets None).
        memory: the memory meter (None: memory is not measured).
        lines: follows the statements of recorded user frames.
    """

    state: SessionState
    meter: Meter
    tracker: ValueTracker
    capture: ArgumentCapture
    classifier: Classifier
    memory: MemoryMeter | None
    lines: LineFollower

    def __post_init__(self) -> None:
        state = self.state
        self.clock = self.meter.clock
        self.stack = state.stack
        self.calls = state.calls
        self.uses = state.uses
        self.produces = state.produces
        self.sequence = state.sequence
        self.freeze_gc = state.freeze_gc
        self.prune_after = state.prune_after
        self.open_frames: set[Any] = set()  # frames of open Python and wrapped-call records
        self.tracker.view_step = self.view_step
        # (step seq, base value, view value, parent record, site) of views made in C
        self.views: list[tuple[int, int, int, list[Any] | None, Any]] = []
        # id(code) -> [recorded calls, touched data, code (kept alive: its id stays its own)]
        self.code_stats: dict[int, list[Any]] = {}

    # ------------------------------------------------------------------ opening
    def record_py(
        self, frame: types.FrameType, code: types.CodeType, info: Any, h0: int = 0
    ) -> None:
        """A Python call: its parameters are read from the frame (the tracer's time counts
        from ``h0`` when given)."""
        h0 = h0 or self.clock()
        memory = self.memory
        m0 = memory.mark() if memory is not None else 0
        if info[1] is None and self.state.line_level:
            self.lines.entering(frame, code, h0)  # steps of what its arguments computed
        args_out: list[Any] = []
        found: list[int] = []
        params = info[2]
        if params:
            local = frame.f_locals
            capture = self.capture
            scan = capture.user_arg if info[1] is None else capture.library_arg
            for name in params:
                value = local.get(name)
                if type(value) in SCALAR_TYPES:  # the common case, inlined
                    args_out.append((name, ARG_SCALAR, value))
                else:
                    scan(name, value, args_out, found)
        back = frame.f_back
        if back is not None and _WRAPPERS and id(back.f_code) in _WRAPPERS:
            back = back.f_back  # called through a library's decorator: made where it was called
        site = (back.f_code, back.f_lasti) if back is not None else None
        rec = self.enter(h0, info[0], info[1], KIND_PY, site, args_out, found, frame, m0)
        self.open_frames.add(frame)
        if info[1] is not None:
            rec[INFO] = info[3]  # the parameter layout, to name the arguments
        elif self.state.line_level and rec[DEPTH] < self.state.max_depth - 1:
            self.lines.follow(rec, frame, code)

    def record_wrapped(self, frame: types.FrameType, info: Any, h0: int = 0) -> None:
        """A call of a recording wrapper (``interpose``): its arguments are the frame's
        ``args`` and ``kwargs``; it stands for the library function it wraps."""
        h0 = h0 or self.clock()
        memory = self.memory
        m0 = memory.mark() if memory is not None else 0
        local = frame.f_locals
        args_out: list[Any] = []
        found: list[int] = []
        library_arg = self.capture.library_arg
        for i, value in enumerate(local["args"]):
            library_arg(i, value, args_out, found)
        for key, value in local["kwargs"].items():
            library_arg(key, value, args_out, found)
        back = frame.f_back
        site = (back.f_code, back.f_lasti) if back is not None else None
        self.enter(h0, info[0], info[1], KIND_WRAPPED, site, args_out, found, frame, m0)
        self.open_frames.add(frame)

    def record_c(
        self, frame: types.FrameType, func: Any, info: Any, owner: Any, h0: int = 0
    ) -> None:
        """A C function called from ``frame`` (``owner``: its ``__self__``)."""
        h0 = h0 or self.clock()
        memory = self.memory
        m0 = memory.mark() if memory is not None else 0
        c_args: list[Any] = []
        c_found: list[int] = []
        if owner is not None and (
            self.tracker.data_cache.get(type(owner)) or self.tracker.is_data(type(owner))
        ):
            self.capture.receiver(owner, c_args, c_found)  # a method of a data value
        site = (frame.f_code, frame.f_lasti)
        self.enter(h0, info[0], info[1], KIND_C, site, c_args, c_found, func, m0)

    def enter(
        self,
        h0: int,
        name: str,
        lib: str | None,
        kind: int,
        site: object,
        args_out: list[Any],
        found: list[int],
        marker: object,
        m0: int,
    ) -> list[Any]:
        """Open a record (``marker``: what closes it, a frame or a C function)."""
        sequence, meter, stack = self.sequence, self.meter, self.stack
        cseq = sequence.next
        sequence.next = cseq + 1
        ncalls = meter.calls = meter.calls + 1
        parent = stack[-1][SEQ] if stack else -1
        rec = [
            cseq, name, parent, site, len(stack), kind, 0, 0, 0, 0, meter.skipped, 0,
            ncalls, 0, 0, args_out, None, lib, marker, 0, 0, 0, 0, None, meter.lines, 0,
            bool(found),
        ]  # fmt: skip
        self.calls.append(rec)
        if not ncalls & 0x3F and self.freeze_gc:
            gc.freeze()  # keep the growing records out of every GC pass (see SessionState)
        if found:
            uses = self.uses
            for vseq in found:
                uses.append((vseq, cseq))
        if self.memory is None:
            stack.append(rec)
        else:
            self.memory.push(rec, stack, m0)
        t0 = meter.clock()
        meter.overhead_ns += t0 - h0
        rec[T0] = t0
        rec[OV0] = meter.overhead_ns
        return rec

    def view_step(self, view: object, base: int) -> int:
        """The value of ``view``, an untracked NumPy item of the tracked array ``base`` (made in
        C: ``for frame in video``, a comprehension over it). Unless a statement's own subscript
        makes it (``video[t].astype(...)``: the line-level step, found as the statement ends),
        it is made by an ``operator.getitem`` step taking ``base``, of no time of its own, in
        the innermost open record, when the window closes (:meth:`_settle_views`): a run time
        iterating a stand-in of ``base`` makes the same subscripts."""
        stack = self.stack
        parent = stack[-1] if stack else None
        cseq = self.sequence.next
        self.sequence.next = cseq + 1
        site = parent[SITE] if parent is not None else None
        frame = parent[FRAME] if parent is not None else None
        if isinstance(frame, types.FrameType):  # the Python frame whose code iterates
            site = (frame.f_code, frame.f_lasti)
        vseq = self.tracker.new_value(view, 0)
        self.views.append((cseq, base, vseq, parent, site))
        return vseq

    def _settle_views(self) -> None:
        """Make the steps of :meth:`view_step`'s views that nothing else produced, in order."""
        views, self.views = self.views, []
        if not views:
            return
        produced = {vseq for _, vseq in self.produces}
        calls = self.calls
        meter = self.meter
        for cseq, base, vseq, parent, site in views:
            if vseq in produced:
                continue
            # no time of its own: at its parent's start
            at = parent[T0] if parent is not None and parent[T0] else meter.clock()
            times = (at, at, meter.overhead_ns, meter.overhead_ns, 0, 0, 0, 0)
            if parent is not None:
                ov, skip, lines = parent[OV0], parent[SKIP0], parent[NL0] or 0
                times = (at, at, ov, ov, skip, skip, lines, lines)
            owner = parent[SEQ] if parent is not None else -1
            depth = parent[DEPTH] + 1 if parent is not None else 0
            args = [(0, ARG_VALUE, base)]
            step = step_record(
                cseq,
                "operator.getitem",
                owner,
                site,
                depth,
                times,
                args,
                ((owner, ("view", cseq)), (), ()),
            )
            calls.insert(bisect.bisect(calls, cseq, key=_seq), step)
            self.uses.append((base, cseq))
            self.produces.append((cseq, vseq))

    # ------------------------------------------------------------------ closing
    def leave(self, t1: int, rec: list[Any], result: object, returned: bool) -> None:
        """Close ``rec`` at ``t1``; ``result`` is what it returned when ``returned``. Records
        opened inside it and still open (an event was missed) are closed first, at ``t1``."""
        memory, meter, stack = self.memory, self.meter, self.stack
        if stack and stack[-1] is not rec and any(r is rec for r in stack):
            while stack[-1] is not rec:
                self.leave(t1, stack[-1], None, False)
        net = memory.measure(rec) if memory is not None else 0
        m0 = memory.mark() if memory is not None else 0
        rec[T1] = t1
        rec[OV1] = meter.overhead_ns
        rec[SKIP1] = meter.skipped
        rec[N1] = meter.calls
        rec[NL1] = meter.lines
        if rec[KIND] == KIND_PY and self.prune_after:
            self._count(rec, result if returned else None)
        if rec[KIND] != KIND_C:
            self.open_frames.discard(rec[FRAME])
        rec[FRAME] = None
        rec[LINES] = None
        if stack and stack[-1] is rec:
            stack.pop()
        if memory is not None:
            memory.settle(rec, stack, net)
        if returned and result is not None:
            self._result(rec, result)
        if memory is not None:
            memory.own(m0)
        meter.overhead_ns += meter.clock() - t1

    def _result(self, rec: list[Any], result: Any) -> None:
        """What a call returned: a value node (new, or a new version), a scalar or a type."""
        cls = type(result)
        tracker = self.tracker
        is_data = tracker.is_data
        data = tracker.data_cache.get(cls) or is_data(cls)
        if not (data or (cls in _CONTAINERS and has_data(result, is_data))):
            rec[RET] = (ARG_SCALAR, result) if cls in SCALAR_TYPES else (ARG_TYPE, cls)
            return
        entry = tracker.lookup(result)
        cseq, python = rec[SEQ], rec[KIND] == KIND_PY
        produces = self.produces
        if entry is None or not python or not _same_shape(result, entry[3]):
            # new, or returned again by a C function (which may have written into it:
            # cv2.rectangle), or resized in place (resize_): a new version
            vseq = tracker.new_value(result, entry[2] + 1 if entry is not None else 0)
            produces.append((cseq, vseq))
        else:
            # a Python function returns what it already holds: the same value node; produced
            # by this call if made inside it (helpers keep chains)
            vseq = entry[1]
            if vseq > cseq:
                produces.append((cseq, vseq))
        if cls is tuple or cls is list or cls is dict:  # a sample's image and mask
            items = result if cls is not dict else list(result.values())
            for item in items[:MAX_CONTAINER_SCAN]:
                if is_data(type(item)):
                    held = tracker.lookup(item)
                    if held is None:
                        produces.append((cseq, tracker.new_value(item, 0)))
                    elif not _same_shape(item, held[3]):  # changed shape in place
                        produces.append((cseq, tracker.new_value(item, held[2] + 1)))
                    elif held[1] > cseq and python:
                        produces.append((cseq, held[1]))
        rec[RET] = (ARG_VALUE, vseq)

    def _count(self, rec: list[Any], result: object) -> None:
        """Count a finished Python call; stop recording functions that never touch data.

        A function recorded ``prune_after`` times whose calls never received or returned a data
        value, made a step or called anything that did (tokenizers, parsers, small helpers) is
        skipped for the rest of the window: its time stays in its callers' self time.
        """
        data = rec[DATA]
        if not data and result is not None:
            cls = type(result)
            is_data = self.tracker.is_data
            data = is_data(cls) or (cls in _CONTAINERS and has_data(result, is_data))
        if data:
            for parent in self.stack:  # every caller on the stack led to data
                parent[DATA] = True
        frame = rec[FRAME]
        code = frame.f_code if frame is not None else None
        if code is None:
            return
        stats = self.code_stats.get(id(code))
        if stats is None:
            stats = self.code_stats[id(code)] = [0, False, code]
        stats[0] += 1
        if data:
            stats[1] = True
        elif stats[0] >= self.prune_after and not stats[1]:
            self.classifier.stop_recording(code)
            self.state.pruned.append(rec[NAME])
            self.lines.forget_code(code)  # its statements are not followed any more either

    def returned(self, frame: types.FrameType, arg: object, h0: int = 0) -> None:
        """A Python frame returns (or yields, or unwinds with ``arg`` None)."""
        importing = self.state.importing
        if importing:
            if importing[-1] is frame:
                importing.pop()
            self.meter.skipped += 1
            return
        stack = self.stack
        if stack and stack[-1][FRAME] is frame:
            self.leave(h0 or self.clock(), stack[-1], arg, True)
            return
        self.meter.skipped += 1
        if frame in self.open_frames:
            self.unwind(frame, arg)

    def unwind(self, frame: types.FrameType, arg: object) -> None:
        """Close every record of ``frame``, with those opened inside it (not on top: an event
        was missed)."""
        t1 = self.clock()
        for rec in [r for r in self.stack if r[FRAME] is frame]:
            self.leave(t1, rec, arg, True)

    def c_returned(self, func: object, h0: int = 0) -> None:
        """A C function returns (or raises)."""
        stack = self.stack
        if stack and stack[-1][FRAME] is func:
            self.leave(h0 or self.clock(), stack[-1], None, False)
        else:
            self.meter.skipped += 1

    def close_open(self, t_stop: int) -> None:
        """Close the records still open when the window closes, and make the steps of the
        views made in C (:meth:`_settle_views`)."""
        stack = self.stack
        while stack:
            rec = stack[-1]
            try:
                self.leave(t_stop, rec, None, False)
            except Exception as error:  # the window must close whatever happened
                self.state.fail(error)
                if stack and stack[-1] is rec:
                    stack.pop()
        self.open_frames.clear()
        self._settle_views()

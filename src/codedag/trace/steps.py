"""Steps: what one statement of a user frame computed outside recorded calls.

When a statement of a traced user frame finishes, :class:`StepMaker` compares what it produced
(the locals it rebound, the containers it wrote into, the value it returned) with the records of
the calls made while it ran, and evaluates the statement's expression tree
(:mod:`codedag.trace.statements`) against them:

- a value that a recorded call returned needs nothing more;
- a value made by operators, subscripts, attribute reads of arrays, or calls the tracer does not
  record (ufuncs such as ``np.exp``) becomes the result of a **step** record named after the
  outermost operation (``operator.truediv``, ``operator.getitem``, ``numpy.exp``,
  ``numpy.ndarray.T``); the step uses the data values the operation read (variables, results of
  recorded calls) and produces the new value;
- a subscript store (``canvas[y0:y1, x0:x1] = tile``) is an ``operator.setitem`` step that
  produces a new version of the container;
- a C method recorded by the profiler without its result (``img.astype(np.float32)``) produces
  the statement's value when it is the outermost call, or an ``intermediate`` value that the
  enclosing step uses;
- an operation computed inside the arguments of a recorded call produces the value that call
  received; inside the arguments of a user function, it is made a step as that function starts
  (:meth:`StepMaker.before_call`, :mod:`codedag.trace.call_arguments`), before the steps of the
  function's own statements that read it.

A statement's time outside recorded calls is shared by its steps (see the builder).
"""

from __future__ import annotations

import functools
import types
from collections.abc import Callable
from typing import Any, Protocol

from codedag.trace.call_arguments import Early, EarlyEvaluation, argument_values
from codedag.trace.evaluation import (
    MISSING,
    S_RECORD,
    S_REGION,
    S_VALUE,
    Evaluation,
    Region,
    numpy_scalar,
)
from codedag.trace.identity import ValueTracker
from codedag.trace.records import (
    DATA,
    DEPTH,
    INFO,
    KIND,
    KIND_C,
    KIND_STEP,
    LIB,
    NL1,
    OV1,
    PARENT,
    SEQ,
    SKIP1,
    T1,
    Sequence,
    step_record,
)
from codedag.trace.statements import GROUP, Expr, Statement

# Line state of a frame (a list kept in the frame's record, LINES field): its statements, the
# running one and where it started (offset, counters), its snapshot, whether it raised, and its
# function's statement counts (shared by the frames of one code object), and what was made as
# user calls inside it started (an Early, or None).
(
    ST_CODE,
    ST_CURRENT,
    ST_START,
    ST_T0,
    ST_OV0,
    ST_SKIP0,
    ST_CALLS0,
    ST_SEQ0,
    ST_SNAP,
    ST_NL0,
    ST_FAILED,
    ST_STATS,
    ST_EARLY,
) = range(13)


class WindowRecords(Protocol):
    """The raw records of a window that steps extend (a :class:`SessionState`)."""

    calls: list[list[Any]]
    values: list[list[Any]]
    uses: list[tuple[int, int]]
    produces: list[tuple[int, int]]
    sequence: Sequence


class StepMaker:
    """Creates step records when statements of traced user frames finish (see module doc).

    Args:
        records: the window's raw records (``calls``, ``values``, ``uses``, ``produces``) and
            their numbering (``sequence``).
        tracker: values by identity.
        skipped: whether the filter skips a callable (the standard library, excluded
            packages): a statement's call of one is not a step.
    """

    def __init__(
        self, records: WindowRecords, tracker: ValueTracker, skipped: Callable[[Any], bool]
    ) -> None:
        self.calls, self.values = records.calls, records.values
        self.uses, self.produces = records.uses, records.produces
        self.next_seq = records.sequence.take
        self.lookup: Callable[[Any], Any] = tracker.lookup
        self.use: Callable[[Any, list[int]], int] = tracker.use
        self.new_value: Callable[[Any, int], int] = tracker.new_value
        self.is_data = tracker.is_data
        self.skipped = skipped
        self.units = 0

    def snapshot(
        self, stmt: Statement, frame: types.FrameType, local: dict[str, Any]
    ) -> dict[str, int] | None:
        """Value nodes of the names a statement may rebind or write into, as it starts
        (``local``: the frame's locals, read once per line event)."""
        if not stmt.snapshot:
            return None
        out: dict[str, int] = {}
        for name in stmt.snapshot:
            obj = local.get(name, MISSING)
            if obj is MISSING:
                obj = frame.f_globals.get(name, MISSING)
            if obj is not MISSING and self.is_data(type(obj)):
                out[name] = self.use(obj, [])
        return out

    def finish(
        self,
        rec: list[Any],
        state: list[Any],
        frame: types.FrameType,
        timing: tuple[int, int, int, int],
        local: dict[str, Any],
        returned: object = MISSING,
    ) -> bool:
        """Create the steps of the statement that just finished in ``rec``'s frame; return
        whether it made any.

        Args:
            rec: the frame's call record.
            state: its line state (``ST_*`` fields).
            frame: the frame.
            timing: ``(t1, ov1, skip1, nl1)`` counters as the statement ends.
            local: the frame's locals (``frame.f_locals`` copies them all: read once).
            returned: the frame's return value when the statement is a ``return``.
        """
        stmt: Statement = state[ST_CURRENT]
        parent = rec[SEQ]
        made = len(self.calls)
        children = self._children(rec, state)
        has_c = any(r[KIND] == KIND_C for r in children)
        early: Early | None = state[ST_EARLY]
        # a recorded library call that received what the statement computed in its arguments
        # (``cv2.resize(img * 2, size)``): that value is made by a step even where the call's
        # own result is all the statement binds (a user function's are made as it starts)
        computed_arguments = bool(stmt.calls) and any(r[LIB] is not None for r in children)
        if (
            early is None
            and not has_c
            and not computed_arguments
            and self._nothing_new(stmt, frame, local, returned)
        ):
            return False  # C calls recorded without their values are linked below
        snap = state[ST_SNAP] or {}
        run = (
            Evaluation(self, frame, local, snap, children)
            if early is None
            else EarlyEvaluation(self, frame, local, snap, children, early)
        )
        unit = (parent, self.units)
        self.units += 1
        siblings = tuple(r[SEQ] for r in children)
        made_early = early is not None and bool(early.steps)
        if early is not None:  # steps made as user calls started: the statement's time is theirs
            for step in early.steps:
                step[T1], step[OV1], step[SKIP1], step[NL1] = timing
                step[INFO] = (unit, siblings, step[INFO][2])

        def make_step(region: Region) -> int:
            return self._step(region, rec, state, frame, timing, (unit, siblings))

        self._bound(stmt, frame, local, state[ST_SEQ0], run, make_step)
        if stmt.kind == "return" and returned is not MISSING and stmt.value is not None:
            self._returned(
                returned, stmt.value, run, functools.partial(self._produce, run, make_step)
            )
        elif stmt.kind == "expr" and stmt.value is not None:
            run.value(stmt.value)  # links recorded calls' arguments computed in the statement
        if (has_c or computed_arguments) and not any(run.matched) and stmt.value is not None:
            # link C calls made by a statement that produced nothing new, and the arguments a
            # recorded call received from operations of the statement
            run.value(stmt.value)
        self._pending(run, make_step)
        if len(self.calls) > made or made_early:
            rec[DATA] = True
            return True
        return False

    def before_call(
        self,
        rec: list[Any],
        state: list[Any],
        frame: types.FrameType,
        callee: types.FrameType,
        timing: tuple[int, int, int, int],
    ) -> None:
        """A user function called by the running statement of ``rec``'s frame starts
        (``callee``: its frame): make steps of what the call's arguments computed, producing
        the values its parameters hold (see :mod:`codedag.trace.call_arguments`).

        Args:
            rec: the calling frame's record.
            state: its line state.
            frame: the calling frame.
            callee: the starting frame.
            timing: ``(t1, ov1, skip1, nl1)`` counters now (the statement's finish replaces
                them).
        """
        early: Early | None = state[ST_EARLY]
        if early is None:
            early = state[ST_EARLY] = Early()
        stmt: Statement = state[ST_CURRENT]
        children = self._children(rec, state)
        local = frame.f_locals
        run = EarlyEvaluation(
            self, frame, local, state[ST_SNAP] or {}, children, early, callee.f_code
        )
        reached = run.reach(stmt.value) if stmt.value is not None else None
        if reached is None:
            return
        unit = (rec[SEQ], self.units)
        self.units += 1
        siblings = tuple(r[SEQ] for r in children)

        def make_step(region: Region) -> int:
            step = self._step(region, rec, state, frame, timing, (unit, siblings))
            early.steps.append(self.calls[-1])
            return step

        lookup, is_data = self.lookup, self.is_data
        for arg, src, obj in argument_values(
            reached, callee, lambda obj: not is_data(type(obj)) or lookup(obj) is not None
        ):
            producer = make_step(src[1]) if src[0] == S_REGION else src[1][SEQ]
            vseq = self.new_value(obj, 0)
            self.produces.append((producer, vseq))
            run.memo[id(arg)] = (S_VALUE, vseq)  # the call's record receives it
        self._pending(run, make_step)
        if early.steps:
            rec[DATA] = True

    def _children(self, rec: list[Any], state: list[Any]) -> list[list[Any]]:
        """The calls the running statement of ``rec``'s frame made directly (recorded ones)."""
        parent = rec[SEQ]
        return [
            r
            for r in self.calls[state[ST_CALLS0] :]
            if r[PARENT] == parent and r[KIND] != KIND_STEP
        ]

    def _pending(self, run: Evaluation, make_step: Callable[[Region], int]) -> None:
        """Steps of the operations computed inside recorded calls' arguments."""
        for region, record, target in run.pending:
            step = make_step(region)
            if target is not None:  # the value the call received
                self.produces.append((step, target))
            else:
                vseq = self.next_seq()
                self.values.append([vseq, "intermediate", 0, "", None, None, 0, "cpu", None])
                self.produces.append((step, vseq))
                self.uses.append((vseq, record[SEQ]))
        run.pending.clear()

    def _produce(
        self,
        run: Evaluation,
        make_step: Callable[[Region], int],
        obj: object,
        expr: Expr,
        version: int,
    ) -> None:
        """``obj`` (at ``version``) was made by ``expr``: by a recorded call or by a step."""
        src = run.value(expr)
        if version == 0 and self.lookup(obj) is not None:
            return  # evaluating found it: a plain variable, nothing was computed
        if src[0] == S_RECORD:
            self.produces.append((src[1][SEQ], self.new_value(obj, version)))
        elif src[0] == S_REGION:
            step = make_step(src[1])
            self.produces.append((step, self.new_value(obj, version)))

    def _bound(
        self,
        stmt: Statement,
        frame: types.FrameType,
        local: dict[str, Any],
        seq0: int,
        run: Evaluation,
        make_step: Callable[[Region], int],
    ) -> None:
        """The names a statement bound to new data values, and the containers it wrote into."""
        lookup, is_data = self.lookup, self.is_data
        mutated = {name for name, _ in stmt.mutated}
        for name, expr in stmt.targets:
            if name in mutated:
                continue
            obj = local.get(name, MISSING)
            if obj is MISSING or lookup(obj) is not None:
                continue
            if is_data(type(obj)):
                self._produce(run, make_step, obj, expr, 0)
            elif numpy_scalar(obj):
                self._number(run, obj, expr)
        for name, expr in stmt.mutated:
            obj = local.get(name, MISSING)
            if obj is MISSING:
                obj = frame.f_globals.get(name, MISSING)
            if obj is MISSING or not is_data(type(obj)):
                continue
            entry = lookup(obj)
            if entry is None:
                self._produce(run, make_step, obj, expr, 0)  # x += y made a new object
            elif entry[1] < seq0:  # not already versioned by a call during the statement
                self._produce(run, make_step, obj, expr, entry[2] + 1)

    def _number(self, run: Evaluation, obj: object, expr: Expr) -> None:
        """A NumPy scalar a name holds (``mean = img.mean()``, ``lo = np.percentile(x, 1)``):
        a value node made by the call that returned it; nothing where no one call did (an item
        unpacked from an array, ``lo, hi = np.percentile(x, (1, 99))``, or arithmetic)."""
        src = run.value(expr)
        if src[0] == S_RECORD:
            self.produces.append((src[1][SEQ], self.new_value(obj, 0)))

    def _nothing_new(
        self, stmt: Statement, frame: types.FrameType, local: dict[str, Any], returned: object
    ) -> bool:
        """Fast path: what the statement bound or returned is not data, or is already known
        (a recorded call made it, or it existed before and was only renamed)."""
        lookup, is_data = self.lookup, self.is_data
        if stmt.kind == "return":
            if returned is MISSING or returned is None:
                return True
            if is_data(type(returned)):
                return lookup(returned) is not None
            return type(returned) not in (tuple, list)
        if stmt.kind not in ("assign", "augassign"):
            return False
        for name, _expr in stmt.targets:
            obj = local.get(name, MISSING)
            if obj is not MISSING and _followed(obj, is_data) and lookup(obj) is None:
                return False
        for name, _expr in stmt.mutated:
            obj = local.get(name, MISSING)
            if obj is MISSING:
                obj = frame.f_globals.get(name, MISSING)
            if obj is not MISSING and is_data(type(obj)):
                return False  # written into: a new version
        return True

    def _returned(
        self, obj: Any, expr: Expr, run: Evaluation, produce: Callable[..., None]
    ) -> None:
        if self.is_data(type(obj)):
            if self.lookup(obj) is None:
                produce(obj, expr, 0)
            else:
                run.value(expr)  # a recorded call made it; C calls inside still get linked
            return
        if type(obj) in (tuple, list) and expr.kind == GROUP and len(expr.children) == len(obj):
            for item, part in zip(obj, expr.children):
                if self.is_data(type(item)) and self.lookup(item) is None:
                    produce(item, part, 0)
        else:
            run.value(expr)

    def _step(
        self,
        region: Region,
        rec: list[Any],
        state: list[Any],
        frame: types.FrameType,
        timing: tuple[int, int, int, int],
        info: tuple[Any, ...],
    ) -> int:
        cseq = self.next_seq()
        t1, ov1, skip1, nl1 = timing
        times = (state[ST_T0], t1, state[ST_OV0], ov1, state[ST_SKIP0], skip1, state[ST_NL0], nl1)
        site = (frame.f_code, state[ST_START])
        args = region.raw_args if region.single else None
        info = (*info, region.path)
        step = step_record(cseq, region.name, rec[SEQ], site, rec[DEPTH] + 1, times, args, info)
        self.calls.append(step)
        for vseq in dict.fromkeys(region.leaves):
            self.uses.append((vseq, cseq))
        return cseq


def _followed(obj: object, is_data: Callable[[type], bool]) -> bool:
    """Whether a name's new object gets a value node: data, or a NumPy scalar (a number a call
    computed, ``mean = img.mean()``, which later statements take)."""
    return is_data(type(obj)) or numpy_scalar(obj)

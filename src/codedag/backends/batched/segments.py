"""Runs of rounds that every active group runs together, as one function of prepared inputs.

When the active groups' next steps have the same keys for several rounds (and none is a ragged
gather, made per batch), the executor would run each of those rounds for all of them at once: a
*segment*. demo_image has two: the resize and cvtColor before the random flip parts the groups,
and the rounds after they meet again (its *tail*, the warp to the end); letterbox one, after its
ragged gather. :func:`run_segment` first classifies every argument of the segment's rounds (an
earlier round of the segment, or from outside it), then prepares those from outside (earlier
results, payload rows, per-sample parameters: what the round by round run would have made) and
hands the segment, a function of those tensors returning the results later steps read, to a
:class:`~.capture.GraphCache` with its signature: the rounds' keys (ops, shapes, dtypes, static
arguments), the batch size, the results kept, the inputs' shapes, dtypes and strides, and the
per-batch constants. How the samples split into groups is not part of it: a segment computes on
all rows at once, so the same segment of batches with other random draws replays one graph.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

import torch

import codedag.backends.batched.ragged as ragged
from codedag.backends.batched.capture import GraphCache
from codedag.backends.batched.collate import BatchRecord, Ref, Step, freeze
from codedag.backends.batched.ops import Batch
from codedag.errors import UnsupportedOperation

log = logging.getLogger(__name__)


class _Group(Protocol):
    """A group of the executor (:class:`codedag.backends.batched.executor._Group`)."""

    samples: list[int]
    steps: list[Step]
    pointer: int
    results: list[Any]


class Runner(Protocol):
    """What a segment needs of the executor (:class:`.executor.BatchExecutor`)."""

    device: torch.device
    capture: GraphCache | None

    def _argument(
        self,
        record: BatchRecord,
        payload: torch.Tensor,
        members: Any,
        slot: int | str,
        ref: Ref,
        key: tuple[Any, ...],
    ) -> Any: ...


MIN_ROUNDS = 2
"""Shorter runs go round by round (a graph's input copies and output clones cost launches too)."""

_Slot = tuple[int | str, str, Any, Any, bool]
"""A round's argument: ``(position or name, kind, index or value, meta, shared)``; kinds ``in``
(a prepared data input), ``tensor`` (a prepared parameter tensor), ``round`` (an earlier round's
result), ``value`` (a constant)."""


class _NotASegment(Exception):
    """Some groups' rows of an argument come from before the segment, some from inside it."""


def span(active: Sequence[_Group]) -> int:
    """Rounds from now that every active group runs together: the same step keys, none a
    ragged gather."""
    lead = active[0]
    length = 0
    for index in range(lead.pointer, len(lead.steps)):
        step = lead.steps[index]
        if isinstance(step.op, ragged.PaddedOp):
            break
        t = index - lead.pointer
        if any(
            g.pointer + t >= len(g.steps) or g.steps[g.pointer + t].key != step.key
            for g in active[1:]
        ):
            break
        length += 1
    return length


def run_segment(
    executor: Runner,
    record: BatchRecord,
    payload: torch.Tensor,
    members: Sequence[_Group],
    length: int,
) -> int:
    """The members' next ``length`` rounds through the executor's graph cache; the rounds run
    (0: not run, run them round by round)."""
    cache = executor.capture
    assert cache is not None
    starts = [g.pointer for g in members]
    try:
        plan = [_classified(members, starts, t) for t in range(length)]
    except _NotASegment:
        return 0
    needed = _needed(members, starts, length)
    n = sum(len(g.samples) for g in members)
    inputs: list[torch.Tensor] = []
    layout: list[Any] = [n, tuple(needed)]
    try:
        rounds = _prepared_rounds(executor, record, payload, members, plan, inputs, layout)
    except UnsupportedOperation:
        return 0  # the round by round run meets it again, where failures are handled
    finally:
        for group, start in zip(members, starts):
            group.pointer = start
    for tensor in inputs:
        layout.append((tuple(tensor.shape), tensor.dtype, tensor.stride(), tensor.device))
    function = _function(rounds, needed, n, executor.device)
    try:
        results = cache.run(tuple(layout), function, inputs)
    except Exception as error:  # run round by round, where failures are handled
        log.debug("batched segment failed (%s: %s); round by round", type(error).__name__, error)
        return 0
    for out, t in zip(results, needed, strict=True):
        row = 0
        for group, start in zip(members, starts):
            group.results[start + t] = (out, row, row + len(group.samples))
            row += len(group.samples)
    for group, start in zip(members, starts):
        group.pointer = start + length
    return length


_Round = tuple[Step, list[_Slot]]


def _prepared_rounds(
    executor: Runner,
    record: BatchRecord,
    payload: torch.Tensor,
    members: Sequence[_Group],
    plan: list[tuple[Step, list[tuple[int | str, Ref, tuple[Any, ...], int | None]]]],
    inputs: list[torch.Tensor],
    layout: list[Any],
) -> list[_Round]:
    """Each round's arguments, those from outside the segment prepared now (the members'
    pointers moved to each round in turn; the caller puts them back)."""
    starts = [g.pointer for g in members]
    rounds = []
    for t, (step, slots) in enumerate(plan):
        for group, start in zip(members, starts):
            group.pointer = start + t
        layout.append(step.key)
        prepared = [
            _prepared(executor, record, payload, members, slot, inputs, layout) for slot in slots
        ]
        rounds.append((step, prepared))
    return rounds


def _function(
    rounds: list[_Round], needed: list[int], n: int, device: torch.device
) -> Callable[[Sequence[torch.Tensor]], list[torch.Tensor]]:
    """The segment as a function of its prepared inputs: the results later steps read."""

    def segment(tensors: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        outs: list[torch.Tensor] = []

        def value(slot: _Slot) -> Any:
            _at, kind, found, meta, shared = slot
            if kind == "in":
                return Batch(tensors[found], meta, shared=shared)
            if kind == "tensor":
                return tensors[found]
            if kind == "round":
                return Batch(outs[found], meta)
            return found

        for step, slots in rounds:
            args = [value(s) for s in slots if isinstance(s[0], int)]
            kwargs = {s[0]: value(s) for s in slots if isinstance(s[0], str)}
            outs.append(checked(step, step.op.run(args, kwargs, n, device), n))
        return [outs[t] for t in needed]

    return segment


def _classified(
    members: Sequence[_Group], starts: list[int], t: int
) -> tuple[Step, list[tuple[int | str, Ref, tuple[Any, ...], int | None]]]:
    """Round ``t``'s step and each argument: ``(position or name, ref, key, round)``, ``round``
    the segment's round its rows come from for every member, ``None``: from outside."""
    step = members[0].steps[starts[0] + t]
    slots: list[tuple[int | str, Ref, tuple[Any, ...]]] = [
        (i, ref, key) for i, (ref, key) in enumerate(zip(step.args, step.key[1]))
    ]
    kw_keys = dict(step.key[2])
    slots += [(name, ref, kw_keys[name]) for name, ref in step.kwargs]
    found = []
    for at, ref, key in slots:
        inside: int | None = None
        if ref[0] in ("s", "x"):
            own = [own_ref(g.steps[start + t], at) for g, start in zip(members, starts)]
            rounds = {
                index - start if kind == "s" and start <= index < start + t else None
                for (kind, index), start in zip(own, starts)
            }
            if len(rounds) != 1:
                raise _NotASegment
            inside = rounds.pop()
        found.append((at, ref, key, inside))
    return step, found


def _prepared(
    executor: Runner,
    record: BatchRecord,
    payload: torch.Tensor,
    members: Sequence[_Group],
    slot: tuple[int | str, Ref, tuple[Any, ...], int | None],
    inputs: list[torch.Tensor],
    layout: list[Any],
) -> _Slot:
    """An argument: an earlier round of the segment, an input prepared now (appended to
    ``inputs``), or a value the signature holds."""
    at, ref, key, inside = slot
    if inside is not None:
        layout.append(("round", inside))
        return (at, "round", inside, key[1], False)
    value = executor._argument(record, payload, members, at, ref, key)
    if isinstance(value, Batch):
        inputs.append(value.tensor)
        layout.append(("in", value.meta, value.shared))
        return (at, "in", len(inputs) - 1, value.meta, value.shared)
    if isinstance(value, torch.Tensor):
        inputs.append(value)
        return (at, "tensor", len(inputs) - 1, None, False)
    if key[0] == "p":  # the samples' values were all the same: a constant of this batch
        layout.append(("p", freeze(value)))
    return (at, "value", value, None, False)


def _needed(members: Sequence[_Group], starts: list[int], length: int) -> list[int]:
    """The segment's rounds whose results are read after it (the last one where it ends a
    group's steps: the group's result)."""
    needed: set[int] = set()
    for group, start in zip(members, starts):
        end = start + length
        if end == len(group.steps):
            needed.add(length - 1)
        for step in group.steps[end:]:
            for ref in (*step.args, *(r for _name, r in step.kwargs)):
                if ref[0] == "s" and start <= ref[1] < end:
                    needed.add(ref[1] - start)
    return sorted(needed)


def own_ref(step: Step, slot: int | str) -> Ref:
    """A step's argument ``slot`` (a position or a keyword)."""
    if isinstance(slot, int):
        return step.args[slot]
    return dict(step.kwargs)[slot]


def checked(step: Step, out: object, n: int) -> torch.Tensor:
    """A round's result, checked against the shape and dtype the step recorded."""
    op = step.op
    expected = (n, *step.meta.shape)
    if not isinstance(out, torch.Tensor) or tuple(out.shape) != expected:
        got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
        raise UnsupportedOperation(f"{op.name}: batch result {got}, expected {expected}")
    if out.dtype != step.meta.torch_dtype:
        raise UnsupportedOperation(f"{op.name}: result dtype {out.dtype}, expected {step.meta}")
    return out

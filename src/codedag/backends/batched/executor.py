"""The batched executor: a record's programs run step by step, one backend call per group.

Samples whose programs are the same (the same step keys: op, the shapes and dtypes of its data,
its static arguments) form a *group*: they run together from start to end. Each round picks one
step key among the groups' next steps and runs it once for every group whose next step has that
key: their data are one ``(n, ...)`` tensor (a view when the rows are adjacent), per-sample
parameters declared by the backend are stacked, static ones passed as they are. A key that a
group still needs later waits, so groups whose programs differ by an optional step (a random
flip) meet again after it; groups that ran a step together and have the same steps left *merge*
for good. So ragged inputs run one call per input shape until the step that gives them one shape
(a resize to a fixed size, a letterbox, a crop), and one call per step after it: backend calls per
batch stay at most (steps before that point) x (distinct inputs) + (steps after it).

Before running, each distinct program may be rewritten by :mod:`.fusion` (runs of elementwise
steps on ``uint8`` data become one table look-up), exactly; and samples whose programs differ
only by a leading resize and constant border of images of different sizes run that prefix as one
padded gather (:mod:`.ragged`) on a device (``sync_free``: where launches cost; on the CPU the
groups per size are faster).

A group whose backend fails runs its samples' CPU replay instead (the original functions on the
recorded arguments), counted as forced by ``backend``. With ``verify`` every round is also run
through the original functions, sample by sample, on the same inputs, and compared through the
tolerance table (:func:`codedag.backends.tolerances.difference`); a batch with any difference is
replaced by its CPU replay.

With a :class:`~.capture.GraphCache` (CUDA), rounds that every active group runs together
(:mod:`.segments`: before a random flip parts them, after they meet again) run as one function
of their prepared inputs, which the cache captures once its signature repeats and replays for
later batches (:mod:`.capture`).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

import codedag.backends.batched.fusion as fusion
import codedag.backends.batched.ragged as ragged
import codedag.backends.batched.segments as segments
from codedag.backends.batched.capture import GraphCache
from codedag.backends.batched.collate import BatchRecord, Ref, Step, entry_view, freeze
from codedag.backends.batched.ops import Batch, Meta
from codedag.backends.batched.transfer import DeviceIO
from codedag.backends.host_sync import no_host_sync
from codedag.backends.tolerances import difference
from codedag.errors import UnsupportedOperation

log = logging.getLogger(__name__)

CPU_CHUNK_BYTES = 8 << 20
"""On the CPU, samples per chunk are sized so a chunk's working set is about this (the caches
and the allocator's reusable memory, rather than fresh pages, for every pass of every step)."""
_WORKING_SET = 4
"""A step's working set per sample, in multiples of its largest result (int32 intermediates of
uint8 data)."""


@dataclass
class Outcome:
    """What running one record did.

    Attributes:
        tensor: the batch, ``(n, *shape)`` on the device.
        groups: distinct programs (with their input shapes) among the deferred samples.
        backend_calls: backend invocations (rounds).
        failed: samples whose group failed and ran their CPU replay.
        mismatches: ``op: difference`` found by ``verify`` (empty: none, or not verified).
        max_abs_diff: with ``verify``, the largest difference between the batch and the
            samples' CPU replay, end to end.
        verified: whether the record was verified.
    """

    tensor: torch.Tensor
    groups: int
    backend_calls: int
    failed: list[int] = field(default_factory=list)
    mismatches: list[str] = field(default_factory=list)
    max_abs_diff: float = 0.0
    verified: bool = False


_Part = tuple[torch.Tensor, int, int]
"""A group's rows of one result: ``tensor[start:stop]`` of a call's output."""


class _Group:
    """Samples running the same steps, and their rows of every result so far."""

    __slots__ = ("origins", "pointer", "programs", "results", "samples", "steps")

    def __init__(self, samples: list[int], programs: list[list[Step]], plan: fusion.Plan) -> None:
        self.samples = samples
        self.programs = programs  # each sample's own steps (per-sample arguments live there)
        self.steps = plan.steps  # what runs: the first sample's steps, maybe fused
        self.origins = plan.origins  # index of each step in ``programs`` (None: fused)
        self.pointer = 0
        self.results: list[_Part | None] = [None] * len(self.steps)

    @property
    def done(self) -> bool:
        return self.pointer >= len(self.steps)

    def next_key(self) -> Any:
        return self.steps[self.pointer].key

    def refs(self, origin: int | None, slot: int | str) -> list[Ref]:
        """Each sample's argument ``slot`` of its step ``origin``."""
        if origin is None:
            raise UnsupportedOperation("a fused step has no per-sample arguments")
        if isinstance(slot, int):
            return [p[origin].args[slot] for p in self.programs]
        return [dict(p[origin].kwargs)[slot] for p in self.programs]


class BatchExecutor:
    """Runs :class:`BatchRecord` objects on ``device`` (see the module docstring).

    Args:
        device: where batches run.
        io: host<->device copies (counted).
        fuse: rewrite programs with :mod:`.fusion` (tests compare with and without).
        chunk_bytes: the CPU's working set per chunk (0: the whole batch at once, as a device).
        sync_free: run the backends without data-dependent host reads
            (:mod:`codedag.backends.host_sync`); ``None``: on every device but the CPU, where
            such reads cost nothing and the paths that make them are faster.
        capture: where segments of batches are captured and replayed (:mod:`.capture`);
            ``None``: they run round by round. Never with ``verify``.
    """

    def __init__(
        self,
        device: torch.device | str,
        io: DeviceIO | None = None,
        fuse: bool = True,
        chunk_bytes: int | None = None,
        sync_free: bool | None = None,
        capture: GraphCache | None = None,
    ) -> None:
        self.device = torch.device(device)
        self.io = io if io is not None else DeviceIO(self.device)
        self.fuse = fuse
        self.chunk_bytes = CPU_CHUNK_BYTES if chunk_bytes is None else chunk_bytes
        self._warned: set[str] = set()
        self.sync_free = self.device.type != "cpu" if sync_free is None else sync_free
        self.capture = capture

    def run(self, record: BatchRecord, verify: bool = False) -> Outcome:
        """The batch of ``record`` on the device (what ``default_collate`` would have stacked).

        On the CPU the samples run in chunks whose working set stays in the caches (the whole
        chain per chunk); a device runs the whole batch at once.
        """
        with no_host_sync(self.sync_free):
            return self._run_chunks(record, verify)

    def _run_chunks(self, record: BatchRecord, verify: bool) -> Outcome:
        payload = self.io.upload(record.payload)  # once: the chunks share it
        size = self._chunk(record)
        if size >= record.n:
            return self._run(record, verify, payload)
        out = torch.empty((record.n, *record.meta.shape), dtype=record.out_dtype)
        total = Outcome(out, groups=0, backend_calls=0, verified=verify)
        programs: set[tuple[Any, ...]] = set()
        for start in range(0, record.n, size):
            part = record.part(start, min(start + size, record.n))
            outcome = self._run(part, verify, payload)
            out[start : start + part.n] = outcome.tensor
            total.backend_calls += outcome.backend_calls
            total.failed.extend(start + i for i in outcome.failed)
            total.mismatches.extend(outcome.mismatches)
            total.max_abs_diff = max(total.max_abs_diff, outcome.max_abs_diff)
            programs.update(tuple(s.key for s in p) for p in part.programs if p)
        total.groups = len(programs)
        return total

    def _chunk(self, record: BatchRecord) -> int:
        """Samples per chunk: the batch on a device, or as many as ``chunk_bytes`` holds."""
        if self.device.type != "cpu" or self.io.moves or not self.chunk_bytes:
            return record.n  # a device (or the CPU copying as one) runs the whole batch
        metas = {id(s.meta): s.meta for p in record.programs if p for s in p}  # shared objects
        largest = max((m.nbytes for m in metas.values()), default=record.meta.nbytes)
        per_sample = _WORKING_SET * max(largest, 1)
        return max(1, min(record.n, self.chunk_bytes // per_sample))

    def _run(self, record: BatchRecord, verify: bool, payload: torch.Tensor) -> Outcome:
        groups = self._groups(record, verify)
        distinct = len(groups)
        failed: set[int] = set()
        mismatches: list[str] = []
        calls = 0
        active = [g for g in groups if not g.done]
        graphs = None if verify else self.capture
        by_round = 0  # rounds left of a segment that could not run as one
        while active:
            if graphs is not None and graphs.on and not by_round:
                length = segments.span(active)
                if length >= segments.MIN_ROUNDS:
                    ran = segments.run_segment(self, record, payload, active, length)
                    if ran:
                        calls += ran
                        active = [g for g in active if not g.done]
                        continue
                    by_round = length
            by_round = max(0, by_round - 1)
            members = self._choose(active)
            calls += 1
            step = members[0].steps[members[0].pointer]
            try:
                out = self._call(record, payload, members, mismatches, verify)
            except Exception as error:
                for group in members:
                    failed.update(group.samples)
                    group.pointer = len(group.steps)
                self._warn_once(step, error)
            else:
                start = 0
                for group in members:
                    stop = start + len(group.samples)
                    group.results[group.pointer] = (out, start, stop)
                    group.pointer += 1
                    start = stop
            active = [g for g in active if not g.done]
        outcome = Outcome(
            self._assemble(record, payload, groups, failed),
            groups=distinct,
            backend_calls=calls,
            failed=sorted(failed),
            mismatches=mismatches,
            verified=verify,
        )
        if verify:
            self._verify_end_to_end(record, outcome)
        return outcome

    # -- groups and scheduling ----------------------------------------------------------------
    def _groups(self, record: BatchRecord, verify: bool) -> list[_Group]:
        by_program: dict[tuple[Any, ...], list[int]] = {}
        for i, program in enumerate(record.programs):
            if program:
                by_program.setdefault(tuple(s.key for s in program), []).append(i)
        if len(by_program) > 1 and self.fuse and self.sync_free and not verify:
            samples = [i for i, program in enumerate(record.programs) if program]
            found = ragged.plan(record, samples)
            if found is not None:
                return [_Group(members, aligned, plan) for members, plan, aligned in found]
        groups = []
        for samples in by_program.values():
            programs = [record.programs[i] for i in samples]
            first = programs[0]
            assert first is not None
            plan = fusion.plan(first, fuse=self.fuse and not verify)
            groups.append(_Group(samples, programs, plan))  # type: ignore[arg-type]
        return groups

    @staticmethod
    def _choose(active: list[_Group]) -> list[_Group]:
        """The groups to run now: those whose next step has the chosen key (one that no group
        needs later, most samples first)."""
        if len(active) == 1:
            return active
        candidates: dict[Any, list[_Group]] = {}
        for group in active:
            candidates.setdefault(group.next_key(), []).append(group)
        if len(candidates) == 1:
            return active
        later = {s.key for g in active for s in g.steps[g.pointer + 1 :]}
        ready = [k for k in candidates if k not in later] or list(candidates)
        best = max(ready, key=lambda k: sum(len(g.samples) for g in candidates[k]))
        return candidates[best]

    # -- one round ----------------------------------------------------------------------------
    def _call(
        self,
        record: BatchRecord,
        payload: torch.Tensor,
        members: list[_Group],
        mismatches: list[str],
        verify: bool,
    ) -> torch.Tensor:
        lead = members[0]
        first = lead.steps[lead.pointer]
        op = first.op
        n = sum(len(g.samples) for g in members)
        if isinstance(op, ragged.PaddedOp):
            return op.run_on(payload, self.io)
        args = [
            self._argument(record, payload, members, position, ref, key)
            for position, (ref, key) in enumerate(zip(first.args, first.key[1]))
        ]
        kw_keys = dict(first.key[2])
        kwargs = {
            name: self._argument(record, payload, members, name, ref, kw_keys[name])
            for name, ref in first.kwargs
        }
        out = segments.checked(first, op.run(args, kwargs, n, self.device), n)
        if verify:
            steps = [p[g.origins[g.pointer]] for g in members for p in g.programs]  # type: ignore[index]
            self._verify_round(steps, args, kwargs, out, mismatches)
        return out

    def _argument(
        self,
        record: BatchRecord,
        payload: torch.Tensor,
        members: list[_Group],
        slot: int | str,
        ref: Ref,
        key: tuple[Any, ...],
    ) -> Any:
        kind = ref[0]
        if kind in ("s", "x") and any(_own_ref(g, slot)[0] != kind for g in members):
            # groups meeting at this step after different starts (a random flip before it in
            # some samples only): each group's rows from where its own value is
            rows = [self._data_rows(record, payload, g, slot) for g in members]
            return Batch(torch.cat(rows), key[1])
        if kind == "s":  # each group's own earlier result (their step numbers may differ)
            parts = [g.results[_own_ref(g, slot)[1]] for g in members]
            return Batch(_joined(parts), key[1])
        if kind == "x":
            refs = [r for g in members for r in g.refs(g.origins[g.pointer], slot)]
            return self._payload_batch(record, payload, [k for _kind, k in refs])
        if key[0] != "p":  # static: equal across the call (part of its key)
            value = ref[1]
            if isinstance(value, np.ndarray) and self.io.moves:
                self.io._count(h2d=value.nbytes)
            return value
        values = [v for g in members for _kind, v in g.refs(g.origins[g.pointer], slot)]
        if _all_same(values):
            return values[0]
        return self.io.value(np.stack([np.asarray(v) for v in values]))

    def _data_rows(
        self, record: BatchRecord, payload: torch.Tensor, group: _Group, slot: int | str
    ) -> torch.Tensor:
        """One group's rows of a data argument: its earlier result, or its samples' inputs."""
        kind, index = _own_ref(group, slot)
        if kind == "s":
            out, start, stop = group.results[index]  # type: ignore[misc]
            return out[start:stop]
        refs = group.refs(group.origins[group.pointer], slot)
        return self._payload_batch(record, payload, [k for _kind, k in refs]).expanded(
            len(group.samples)
        )

    def _payload_batch(
        self, record: BatchRecord, payload: torch.Tensor, indices: list[int]
    ) -> Batch:
        offset, meta = record.entries[indices[0]]
        if all(k == indices[0] for k in indices):
            return Batch(entry_view(payload, offset, meta), meta, shared=True)
        stride = meta.nbytes
        adjacent = all(
            record.entries[k][1] == meta and record.entries[k][0] == offset + j * stride
            for j, k in enumerate(indices)
        )
        if adjacent:
            whole = Meta((len(indices), *meta.shape), meta.dtype, meta.kind)
            return Batch(entry_view(payload, offset, whole), meta)
        found = _grid(record, indices, meta)
        if found is not None:  # rows of one strided view, out of order: one gather
            base, rows = found
            whole = Meta((max(rows) + 1, *meta.shape), meta.dtype, meta.kind)
            index = torch.tensor(rows, device=payload.device)
            return Batch(entry_view(payload, base, whole).index_select(0, index), meta)
        views = [entry_view(payload, *record.entries[k]) for k in indices]
        return Batch(torch.stack(views), meta)

    # -- output ---------------------------------------------------------------------------------
    def _assemble(
        self,
        record: BatchRecord,
        payload: torch.Tensor,
        groups: list[_Group],
        failed: set[int],
    ) -> torch.Tensor:
        dtype = record.out_dtype
        finished = [g for g in groups if g.steps and g.samples[0] not in failed]
        parts = [g.results[-1] for g in finished]
        order = [i for g in finished for i in g.samples]
        if finished and len(order) == record.n:
            joined = _joined(parts).to(dtype)
            if order == list(range(record.n)):
                return joined.contiguous()
            inverse = [0] * record.n
            for row, i in enumerate(order):
                inverse[i] = row
            return joined.index_select(0, torch.tensor(inverse, device=joined.device))
        out = torch.empty((record.n, *record.meta.shape), dtype=dtype, device=self.device)
        for group, part in zip(finished, parts):
            assert part is not None
            rows = torch.tensor(group.samples, device=self.device)
            out.index_copy_(0, rows, part[0][part[1] : part[2]].to(dtype))
        covered = set(order)
        for i in range(record.n):
            if i in covered:
                continue
            if record.programs[i] is None:
                out[i] = entry_view(payload, *record.entries[record.ready[i]]).to(dtype)
            else:
                out[i] = self.io.value(_as_tensor(replay(record, i))).to(dtype)
        return out

    # -- verification ---------------------------------------------------------------------------
    def _verify_round(
        self,
        steps: list[Step],
        args: list[Any],
        kwargs: dict[str, Any],
        out: torch.Tensor,
        mismatches: list[str],
    ) -> None:
        op = steps[0].op
        for row, step in enumerate(steps):
            sample_args = [_sample_value(a, ref, row) for a, ref in zip(args, step.args)]
            refs = dict(step.kwargs)
            sample_kwargs = {k: _sample_value(v, refs[k], row) for k, v in kwargs.items()}
            expected = op.original(*sample_args, **sample_kwargs)
            got = _like(expected, out[row])
            problem = difference(op.name, expected, got)
            if problem is not None:
                mismatches.append(f"{op.name}: {problem}")
                return

    def _verify_end_to_end(self, record: BatchRecord, outcome: Outcome) -> None:
        worst = 0.0
        references = {}
        for i, program in enumerate(record.programs):
            if not program or i in outcome.failed:
                continue
            reference = _as_tensor(replay(record, i))
            references[i] = reference
            got = outcome.tensor[i].detach().cpu()
            if reference.dtype.is_floating_point or reference.dtype.is_complex:
                gap = (got.double() - reference.double()).abs().nan_to_num(0.0)
            else:
                gap = (got.long() - reference.long()).abs().double()
            if gap.numel():
                worst = max(worst, float(gap.max()))
        outcome.max_abs_diff = worst
        if outcome.mismatches:
            rows = [
                self.io.value(references[i]) if i in references else outcome.tensor[i]
                for i in range(record.n)
            ]
            outcome.tensor = torch.stack([r.to(record.out_dtype) for r in rows])

    def _warn_once(self, step: Step, error: Exception) -> None:
        reason = f"{step.op.name}: {type(error).__name__}: {error}"[:300]
        if reason not in self._warned:
            self._warned.add(reason)
            level = logging.INFO if isinstance(error, UnsupportedOperation) else logging.WARNING
            log.log(level, "batched group ran its CPU replay instead (%s)", reason)


def _own_ref(group: _Group, slot: int | str) -> Ref:
    step = group.steps[group.pointer]
    if isinstance(slot, int):
        return step.args[slot]
    return dict(step.kwargs)[slot]


def _grid(record: BatchRecord, indices: list[int], meta: Meta) -> tuple[int, list[int]] | None:
    """The entries ``indices`` as rows of one view from the lowest of their offsets (all of
    ``meta``, at whole multiples of its size from it), or ``None``."""
    stride = meta.nbytes
    entries = [record.entries[k] for k in indices]
    if not stride or any(m != meta for _, m in entries):
        return None
    base = min(offset for offset, _ in entries)
    rows = []
    for offset, _ in entries:
        row, rest = divmod(offset - base, stride)
        if rest:
            return None
        rows.append(row)
    return base, rows


def _joined(parts: list[_Part | None]) -> torch.Tensor:
    """The parts' rows as one tensor: a view when they are adjacent rows of one output."""
    tensor, start, stop = parts[0]  # type: ignore[misc]
    adjacent = True
    for part in parts[1:]:
        assert part is not None
        if part[0] is not tensor or part[1] != stop:
            adjacent = False
            break
        stop = part[2]
    if adjacent:
        return tensor if start == 0 and stop == tensor.shape[0] else tensor[start:stop]
    return torch.cat([p[0][p[1] : p[2]] for p in parts])  # type: ignore[index]


def _all_same(values: list[Any]) -> bool:
    first = values[0]
    if all(v is first for v in values):
        return True
    try:
        key = freeze(first)
        return all(freeze(v) == key for v in values[1:])
    except UnsupportedOperation:
        return False


def _sample_value(arg: object, ref: Ref, row: int) -> Any:
    """One sample's argument of a round, on the host, as the original function takes it."""
    if isinstance(arg, Batch):
        tensor = arg.tensor if arg.shared else arg.tensor[row]
        tensor = tensor.detach().cpu()
        return tensor.numpy() if arg.meta.kind == "array" else tensor
    if ref[0] == "v":
        return ref[1]
    return arg


def _like(expected: object, got: torch.Tensor) -> Any:
    """A batched result row as the kind of value the original returned."""
    got = got.detach().cpu()
    if isinstance(expected, torch.Tensor):
        return got
    array = got.numpy()
    if isinstance(expected, np.generic):
        return array[()]
    return array


def _as_tensor(value: object) -> torch.Tensor:
    if isinstance(value, torch.Tensor):
        return value
    return torch.as_tensor(np.ascontiguousarray(value))


def replay(record: BatchRecord, index: int) -> Any:
    """Sample ``index`` of ``record`` computed on the CPU with the original functions."""
    program = record.programs[index]
    if program is None:
        return record.host_entry(record.ready[index])
    values: list[Any] = []
    for step in program:

        def value(ref: Ref) -> Any:
            kind, target = ref
            if kind == "s":
                return values[target]
            if kind == "x":
                return record.host_entry(target)
            return target

        args = [value(r) for r in step.args]
        kwargs = {k: value(r) for k, r in step.kwargs}
        values.append(step.op.original(*args, **kwargs))
    return values[-1]

"""The batched executor: a record's programs run step by step, one backend call per group.

Samples advance through their programs together. Each round picks one *step key* (op, the shapes
and dtypes of its data, its static arguments) among the samples' next steps and runs it once for
every sample whose next step has that key: per-sample data are gathered into one ``(n, ...)``
tensor (a view when the rows are already adjacent), per-sample parameters declared by the backend
are stacked, static ones passed as they are. A key that also appears later in another sample's
program waits, so samples whose programs differ by an optional step (a random flip) meet again
after it: backend calls per batch stay at most (steps of the chain) x (distinct programs), and
ragged inputs run one call per input shape until the first resize makes them uniform.

A group whose backend fails runs its samples' CPU replay instead (the original functions on the
recorded arguments), counted as forced by ``backend``. With ``verify`` every round is also run
through the original functions, sample by sample, on the same inputs, and compared through the
tolerance table (:func:`codedag.backends.tolerances.difference`); a batch with any difference is
replaced by its CPU replay.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from codedag.backends.batched.collate import BatchRecord, Ref, Step, entry_view, freeze
from codedag.backends.batched.ops import PER_SAMPLE, Batch, Meta
from codedag.backends.batched.transfer import DeviceIO
from codedag.backends.tolerances import difference
from codedag.errors import UnsupportedOperation

log = logging.getLogger(__name__)


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


_Part = tuple[torch.Tensor, int]  # a sample's value: row ``int`` of a round's result


class BatchExecutor:
    """Runs :class:`BatchRecord` objects on ``device`` (see the module docstring)."""

    def __init__(self, device: torch.device | str, io: DeviceIO | None = None) -> None:
        self.device = torch.device(device)
        self.io = io if io is not None else DeviceIO(self.device)
        self._warned: set[str] = set()

    def run(self, record: BatchRecord, verify: bool = False) -> Outcome:
        """The batch of ``record`` on the device (what ``default_collate`` would have stacked)."""
        payload = self.io.upload(record.payload)
        programs = record.programs
        results: list[list[_Part]] = [[] for _ in programs]
        pointer = [0] * len(programs)
        active = [i for i, p in enumerate(programs) if p]
        failed: set[int] = set()
        mismatches: list[str] = []
        calls = 0
        while active:
            candidates: dict[Hashable, list[int]] = {}
            for i in active:
                candidates.setdefault(programs[i][pointer[i]].key, []).append(i)  # type: ignore[index]
            members = candidates[self._choose(candidates, programs, pointer, active)]
            calls += 1
            try:
                out = self._round(record, payload, members, pointer, results, mismatches, verify)
            except Exception as error:
                failed.update(members)
                self._warn_once(programs[members[0]][pointer[members[0]]], error)  # type: ignore[index]
            else:
                for row, i in enumerate(members):
                    results[i].append((out, row))
            for i in members:
                pointer[i] += 1
            active = [
                i
                for i in active
                if i not in failed and pointer[i] < len(programs[i])  # type: ignore[arg-type]
            ]
        outcome = Outcome(
            self._assemble(record, payload, results, failed),
            groups=len({tuple(s.key for s in p) for p in programs if p}),
            backend_calls=calls,
            failed=sorted(failed),
            mismatches=mismatches,
            verified=verify,
        )
        if verify:
            self._verify_end_to_end(record, outcome)
        return outcome

    # -- scheduling ---------------------------------------------------------------------------
    @staticmethod
    def _choose(
        candidates: dict[Hashable, list[int]],
        programs: list[list[Step] | None],
        pointer: list[int],
        active: list[int],
    ) -> Hashable:
        """The step key to run now: one no other sample still needs later, most samples first."""
        later: set[Hashable] = set()
        for i in active:
            program = programs[i]
            assert program is not None
            later.update(step.key for step in program[pointer[i] + 1 :])
        ready = [k for k in candidates if k not in later] or list(candidates)
        return max(ready, key=lambda k: len(candidates[k]))

    # -- one round ----------------------------------------------------------------------------
    def _round(
        self,
        record: BatchRecord,
        payload: torch.Tensor,
        members: list[int],
        pointer: list[int],
        results: list[list[_Part]],
        mismatches: list[str],
        verify: bool,
    ) -> torch.Tensor:
        steps = [record.programs[i][pointer[i]] for i in members]  # type: ignore[index]
        first = steps[0]
        op = first.op
        args = [
            self._argument(
                record, payload, op, position, [s.args[position] for s in steps], members, results
            )
            for position in range(len(first.args))
        ]
        kwargs = {
            name: self._argument(
                record, payload, op, name, [dict(s.kwargs)[name] for s in steps], members, results
            )
            for name, _ref in first.kwargs
        }
        out = op.run(args, kwargs, len(members), self.device)
        expected = (len(members), *first.meta.shape)
        if not isinstance(out, torch.Tensor) or tuple(out.shape) != expected:
            got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
            raise UnsupportedOperation(f"{op.name}: batch result {got}, expected {expected}")
        if out.dtype != first.meta.torch_dtype:
            raise UnsupportedOperation(
                f"{op.name}: result dtype {out.dtype}, expected {first.meta}"
            )
        if verify:
            self._verify_round(steps, args, kwargs, out, mismatches)
        return out

    def _argument(
        self,
        record: BatchRecord,
        payload: torch.Tensor,
        op: Any,
        slot: int | str,
        refs: list[Ref],
        members: list[int],
        results: list[list[_Part]],
    ) -> Any:
        kind = refs[0][0]
        if kind == "s":
            meta = record.programs[members[0]][refs[0][1]].meta  # type: ignore[index]
            return Batch(_rows([results[i][j] for i, (_k, j) in zip(members, refs)]), meta)
        if kind == "x":
            return self._payload_batch(record, payload, [k for _kind, k in refs])
        values = [v for _kind, v in refs]
        if op.slot_kind(slot, values[0]) != PER_SAMPLE or _all_equal(values):
            if isinstance(values[0], np.ndarray) and self.io.moves:
                self.io._count(h2d=values[0].nbytes)
            return values[0]
        return self.io.value(np.stack([np.asarray(v) for v in values]))

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
        views = [entry_view(payload, *record.entries[k]) for k in indices]
        return Batch(torch.stack(views), meta)

    # -- output ---------------------------------------------------------------------------------
    def _assemble(
        self,
        record: BatchRecord,
        payload: torch.Tensor,
        results: list[list[_Part]],
        failed: set[int],
    ) -> torch.Tensor:
        dtype = record.out_dtype
        finals = [
            results[i][-1] if record.programs[i] and i not in failed else None
            for i in range(record.n)
        ]
        if all(part is not None for part in finals):
            tensor = finals[0][0]  # type: ignore[index]
            same = all(p[0] is tensor and p[1] == row for row, p in enumerate(finals))  # type: ignore[index]
            if same and tensor.shape[0] == record.n:
                return tensor.to(dtype).contiguous()
        rows = []
        for i, part in enumerate(finals):
            if part is not None:
                rows.append(part[0][part[1]])
            elif record.programs[i] is None:
                rows.append(entry_view(payload, *record.entries[record.ready[i]]))
            else:
                rows.append(self.io.value(_as_tensor(replay(record, i))))
        return torch.stack([r.to(dtype) for r in rows])

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


def _rows(parts: list[_Part]) -> torch.Tensor:
    """The parts as one ``(n, ...)`` tensor: a view when they are adjacent rows of one result."""
    tensor = parts[0][0]
    rows = [row for _t, row in parts]
    if all(t is tensor for t, _row in parts):
        start = rows[0]
        if rows == list(range(start, start + len(rows))):
            return (
                tensor
                if start == 0 and len(rows) == tensor.shape[0]
                else tensor[start : start + len(rows)]
            )
        return tensor.index_select(0, torch.tensor(rows, device=tensor.device))
    return torch.stack([t[row] for t, row in parts])


def _all_equal(values: list[Any]) -> bool:
    first = values[0]
    if all(v is first for v in values):
        return True
    try:
        key = freeze(first)
        return all(freeze(v) == key for v in values[1:])
    except UnsupportedOperation:
        return False


def _sample_value(arg: Any, ref: Ref, row: int) -> Any:
    """One sample's argument of a round, on the host, as the original function takes it."""
    if isinstance(arg, Batch):
        tensor = arg.tensor if arg.shared else arg.tensor[row]
        tensor = tensor.detach().cpu()
        return tensor.numpy() if arg.meta.kind == "array" else tensor
    if ref[0] == "v":
        return ref[1]
    return arg


def _like(expected: Any, got: torch.Tensor) -> Any:
    """A batched result row as the kind of value the original returned."""
    got = got.detach().cpu()
    if isinstance(expected, torch.Tensor):
        return got
    array = got.numpy()
    if isinstance(expected, np.generic):
        return array[()]
    return array


def _as_tensor(value: Any) -> torch.Tensor:
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

"""Rewriting a group's program before it runs: steps that can run as one, exactly.

A run of value-wise steps (NumPy ufuncs and operators, ``clip``, ``astype``) on ``uint8`` data,
whose other operands are constants (scalars, or small arrays broadcast along the trailing axes
as ``MEAN``/``STD`` per channel are), computes each output element from one input value and its
position along the axes where the constants vary. The whole run is then a table: the steps'
own NumPy functions evaluated once on all 256 values (times those positions), and on a batch one
gather (``astype(float32) / 255 - mean) / std`` is one pass instead of four, bit for bit what
NumPy computes per sample, since the table *is* NumPy's result for every possible input).
Which steps a table computes exactly is :mod:`codedag.backends.exact_tables`' rule: a run ends
before a step it does not name, and is cut before a step it refuses on the run's values.

:func:`plan` returns the steps to run and, for each, its index in the recorded program (where
the samples' own arguments are), or ``None`` for a step made here.
"""

from __future__ import annotations

import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from codedag.backends import exact_tables
from codedag.backends.batched.collate import Ref, Step
from codedag.backends.batched.ops import Batch, ElementwiseOp, Meta, Op
from codedag.backends.batched.views import CastOp
from codedag.backends.host_sync import host_sync_allowed

MIN_STEPS = 2
"""Shorter runs stay as they are (one pass either way)."""
MAX_TABLE_VALUES = 1 << 16
"""Tables larger than this (constants varying along large axes) are not built."""
_TABLE_DTYPES = (np.dtype(np.uint8), np.dtype(np.int8), np.dtype(np.bool_))


@dataclass(frozen=True)
class Plan:
    """The steps a group runs, and where each came from in its recorded program."""

    steps: list[Step]
    origins: list[int | None]


def plan(program: list[Step], fuse: bool = True) -> Plan:
    """What to run for ``program`` (``fuse=False``: the program as recorded)."""
    if not fuse or len(program) < MIN_STEPS:
        return Plan(list(program), list(range(len(program))))
    key = tuple(s.key for s in program)
    found = _PLANS.get(key)
    if found is None:
        found = _plan(program)
        with _LOCK:
            if len(_PLANS) > 256:
                _PLANS.clear()
            _PLANS[key] = found
    return found


def _plan(program: list[Step]) -> Plan:
    readers = _readers(program)
    steps: list[Step] = []
    origins: list[int | None] = []
    renumber: dict[int, int] = {}
    j = 0
    while j < len(program):
        end = _run_end(program, readers, j)
        if end - j >= MIN_STEPS:
            fused = _fused_step(program[j:end])
            if fused is not None:
                step, used = fused
                steps.append(_renumbered(step, renumber))
                origins.append(None)
                renumber[j + used - 1] = len(steps) - 1
                j += used
                continue
        steps.append(_renumbered(program[j], renumber))
        origins.append(j)
        renumber[j] = len(steps) - 1
        j += 1
    return Plan(steps, origins)


def _readers(program: list[Step]) -> dict[int, int]:
    """How many argument slots read each step's result."""
    count: dict[int, int] = {}
    for step in program:
        for ref in (*step.args, *(r for _k, r in step.kwargs)):
            if ref[0] == "s":
                count[ref[1]] = count.get(ref[1], 0) + 1
    return count


def _data_slots(step: Step) -> list[int]:
    return [i for i, key in enumerate(step.key[1]) if key[0] != "c"]


def _value_wise(step: Step) -> bool:
    """A NumPy ufunc, ``clip`` or cast the exact-table rule names, whose one non-constant
    argument is an earlier result."""
    if not isinstance(step.op, ElementwiseOp | CastOp) or step.meta.kind != "array":
        return False
    if step.op.name not in exact_tables.NAMES:
        return False
    if any(key[0] != "c" for _name, key in step.key[2]):
        return False
    slots = _data_slots(step)
    return len(slots) == 1 and step.args[slots[0]][0] == "s"


def _run_end(program: list[Step], readers: dict[int, int], start: int) -> int:
    """The end of the longest run of fusable steps from ``start`` (``start``: none)."""
    first = program[start]
    if not _value_wise(first):
        return start
    data: Meta = first.key[1][_data_slots(first)[0]][1]
    if data.kind != "array" or np.dtype(data.dtype) not in _TABLE_DTYPES:
        return start
    end = start + 1
    while end < len(program):
        step = program[end]
        if not _value_wise(step) or readers.get(end - 1, 0) != 1:
            break
        if step.args[_data_slots(step)[0]] != ("s", end - 1):
            break
        end += 1
    return end


# -- the fused step ------------------------------------------------------------------------------


class TableOp(Op):
    """A run of value-wise steps as a table look-up (see the module docstring)."""

    def __init__(self, table: torch.Tensor, meta: Meta, name: str) -> None:
        self.table = table  # (256, *varying): the run's output for each input value
        self.meta_out = meta
        self.name = name
        self._on: dict[torch.device, tuple[torch.Tensor, torch.Tensor, int]] = {}

    def key(self) -> tuple[Any, ...]:
        return ("fused", self.name, id(self))

    def original(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("a fused step is never replayed: its steps are")

    def run(self, args: list[Any], kwargs: dict[str, Any], n: int, device: torch.device) -> Any:
        batch: Batch = args[0]
        x = batch.tensor
        found = self._on.get(device)
        if found is None:
            found = self._on[device] = self._on_device(device, x.dtype)
        flat, offsets, per_value = found
        # each element's row of the table, at its position along the varying axes
        if host_sync_allowed():  # the CPU: a promoting broadcast add is slow there, in place not
            index = x.to(torch.int32)
            if per_value > 1:
                index = index.mul_(per_value).add_(offsets)
            elif x.dtype == torch.int8:
                index += 128
        else:  # a device: one pass (take and advanced indexing are slower than index_select)
            index = torch.add(offsets, x, alpha=per_value)
        return flat.index_select(0, index.reshape(-1)).view(x.shape)  # x may be strided

    def _on_device(
        self, device: torch.device, dtype: torch.dtype
    ) -> tuple[torch.Tensor, torch.Tensor, int]:
        """The flat table, each position's offset in a row (int8 values shifted to 0..255)
        and the row length, on ``device``."""
        varying = tuple(self.table.shape[1:])
        per_value = math.prod(varying)
        offsets = torch.arange(per_value, dtype=torch.int32).view(varying)
        if dtype == torch.int8:
            offsets += 128 * per_value
        return self.table.reshape(-1).to(device), offsets.to(device), per_value


def _fused_step(run: list[Step]) -> tuple[Step, int] | None:
    """The fused step of ``run``'s first steps, and how many it computes (None: no table)."""
    first = run[0]
    slot = _data_slots(first)[0]
    in_meta: Meta = first.key[1][slot][1]
    found = _table(run, in_meta, slot)
    if found is None:
        return None
    table, used = found
    run = run[:used]
    last = run[-1]
    names = "+".join(s.op.name.rsplit(".", 1)[-1] for s in run)
    op = TableOp(table, last.meta, f"table[{names}]")
    key = (("fused", tuple(s.key for s in run)), (("d", in_meta),), ())
    return Step(op, (first.args[slot],), (), last.meta, key), used


def _table(run: list[Step], in_meta: Meta, slot: int) -> tuple[torch.Tensor, int] | None:
    """The output of the run's first steps for every input value (leading axis) and how many
    steps that is: up to the first the exact-table rule refuses or that fails on the values.
    ``None`` when fewer than :data:`MIN_STEPS` remain or they cannot be a table (constants
    varying along leading axes, a result of another shape, a large table)."""
    ndim = len(in_meta.shape)
    dtype = np.dtype(in_meta.dtype)
    values = np.arange(256, dtype=np.int64)
    if dtype == np.int8:
        values -= 128
    elif dtype == np.bool_:
        values = values[:2]
    probe: Any = values.astype(dtype).reshape(-1, *([1] * ndim))
    used = 0
    for i, step in enumerate(run):
        data = slot if i == 0 else _data_slots(step)[0]
        args = [probe if j == data else ref[1] for j, ref in enumerate(step.args)]
        kwargs = {k: ref[1] for k, ref in step.kwargs}
        try:
            with np.errstate(all="ignore"):
                result = step.op.original(*args, **kwargs)
        except Exception:
            break
        if exact_tables.refusal(step.op.name, probe, result) is not None:
            break
        probe, used = result, i + 1
    if used < MIN_STEPS:
        return None
    last = run[used - 1].meta
    if probe.dtype != np.dtype(last.dtype) or probe.ndim != ndim + 1:
        return None
    varying = probe.shape[1:]
    for size, full in zip(varying, in_meta.shape, strict=True):
        if size not in (1, full):
            return None
    if probe.size > MAX_TABLE_VALUES:
        return None
    if len(values) != 256:  # bool: pad to 256 rows so every index of a byte is valid
        probe = np.concatenate([probe, np.repeat(probe[-1:], 256 - len(values), axis=0)])
    return torch.from_numpy(np.ascontiguousarray(probe)), used


def _renumbered(step: Step, renumber: dict[int, int]) -> Step:
    def ref(r: Ref) -> Ref:
        return ("s", renumber[r[1]]) if r[0] == "s" else r

    args = tuple(ref(r) for r in step.args)
    kwargs = tuple((k, ref(r)) for k, r in step.kwargs)
    if args == step.args and kwargs == step.kwargs:
        return step
    return Step(step.op, args, kwargs, step.meta, step.key)


_PLANS: dict[tuple[Any, ...], Plan] = {}
_LOCK = threading.Lock()

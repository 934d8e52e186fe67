"""Collate: the deferred samples of a batch become one :class:`BatchRecord`.

``default_collate`` walks tuples, lists and dicts of samples and hands each position's list of
values to a function chosen by the type of the first one. Inside a fetch with batched execution
the loader's ``default_collate`` runs with :data:`COLLATE_FN_MAP`, torch's own map plus
:func:`collate_deferred` for :class:`~.deferred.LazyArray` and :class:`~.deferred.LazyTensor`;
:func:`normalize` first dresses concrete values that share a position with deferred ones (samples
that were forced) so the first value's type never decides wrongly. A custom ``collate_fn`` gets
the deferred samples: its ``torch.stack`` (or ``np.stack``) of them is :func:`collate_deferred`
too (:func:`~.deferred.collating`), anything else it does with them forces them.

A record holds, per deferred sample, its *program*: the recorded steps in order, each with its
op, argument template and the key that groups it with other samples' steps (op, the shapes and
dtypes of its data, its static arguments by value). Concrete data (decoded images, samples that
were forced) is packed into one flat ``uint8`` tensor, the *payload*, in the worker: it crosses to
the main process in shared memory, is pinned by the DataLoader's pin thread (``pin_memory()``), and
goes to the device in one copy.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch
from torch.utils.data._utils.collate import collate, default_collate_fn_map

import codedag.backends.batched.deferred as deferred
from codedag.backends.batched.deferred import Lazy, Node, evaluate, ready
from codedag.backends.batched.forcing import FORCED
from codedag.backends.batched.lazy_array import LazyArray
from codedag.backends.batched.lazy_tensor import LazyTensor
from codedag.backends.batched.ops import DATA, PER_SAMPLE, SMALL_BYTES, Meta, Op, meta_of
from codedag.backends.lazy_values import in_tree, rebuilt, resolve_tree
from codedag.devices.torch_devices import cuda_available
from codedag.errors import UnsupportedOperation

Ref = tuple[str, Any]
"""An argument of a step: ``("s", j)`` step j's result, ``("x", k)`` payload entry k,
``("v", value)`` a concrete value."""


@dataclass
class Step:
    """One recorded operation of a sample's program."""

    op: Op
    args: tuple[Ref, ...]
    kwargs: tuple[tuple[str, Ref], ...]
    meta: Meta
    key: tuple[Any, ...]


@dataclass
class BatchRecord:
    """The deferred values of one batch position, as ``default_collate`` would have stacked them.

    Attributes:
        meta: one sample's shape and dtype.
        programs: per sample, its steps (the last one's result is the sample), or ``None`` for a
            sample that is concrete (its value is payload entry ``ready[i]``).
        ready: per sample, the payload entry of a concrete sample (``-1`` for deferred ones).
        payload: every concrete input, packed (``uint8``, flat).
        entries: ``(offset, meta)`` of each payload entry.
        worker_ns: time the fetch took where the record was made.
        sites: forcings counted where the record was made since the previous record.
        pid: the process that made the record.
    """

    meta: Meta
    programs: list[list[Step] | None]
    ready: list[int]
    payload: torch.Tensor
    entries: list[tuple[int, Meta]]
    worker_ns: int = 0
    sites: dict[str, int] = field(default_factory=dict)
    pid: int = field(default_factory=os.getpid)

    @property
    def n(self) -> int:
        """Samples in the batch."""
        return len(self.programs)

    @property
    def deferred(self) -> int:
        """Samples whose programs run batched."""
        return sum(1 for p in self.programs if p is not None)

    @property
    def out_dtype(self) -> torch.dtype:
        """The dtype ``default_collate`` would give the stacked batch."""
        return self.meta.torch_dtype

    def pin_memory(self, device: object = None) -> BatchRecord:
        """The DataLoader's pin thread calls this: pin the payload for an asynchronous copy."""
        if not self.payload.is_pinned() and cuda_available():
            self.payload = self.payload.pin_memory()
        return self

    def part(self, start: int, stop: int) -> BatchRecord:
        """Samples ``start:stop`` as a record of their own (sharing the payload)."""
        return BatchRecord(
            self.meta,
            self.programs[start:stop],
            self.ready[start:stop],
            self.payload,
            self.entries,
            self.worker_ns,
            {},
            self.pid,
        )

    def host_entry(self, index: int) -> Any:
        """Payload entry ``index`` as the value it was (NumPy array or tensor), on the host."""
        offset, meta = self.entries[index]
        host = self.payload if self.payload.device.type == "cpu" else self.payload.cpu()
        return entry_view(host, offset, meta, as_numpy=meta.kind == "array")

    def __repr__(self) -> str:
        return f"BatchRecord({self.n} samples, {self.deferred} deferred, {self.meta})"


def entry_view(buffer: torch.Tensor, offset: int, meta: Meta, as_numpy: bool = False) -> Any:
    """The payload bytes of one entry viewed as its tensor (or NumPy array)."""
    dtype = meta.torch_dtype
    tensor = buffer[offset : offset + meta.nbytes].view(dtype).view(meta.shape)
    return tensor.numpy() if as_numpy else tensor


# -- building records ----------------------------------------------------------------------------


class _Packer:
    """Collects concrete inputs (deduplicated by identity) and packs them into one buffer."""

    def __init__(self) -> None:
        self.values: list[Any] = []
        self.metas: list[Meta] = []
        self._index: dict[int, int] = {}

    def add(self, value: object) -> int:
        found = self._index.get(id(value))
        if found is not None:
            return found
        self._index[id(value)] = len(self.values)
        self.values.append(value)
        self.metas.append(meta_of(value))
        return len(self.values) - 1

    def pack(self, shared: bool) -> tuple[torch.Tensor, list[tuple[int, Meta]]]:
        entries = []
        offset = 0
        for meta in self.metas:
            size = torch.empty((), dtype=meta.torch_dtype).element_size()
            offset = -(-offset // size) * size  # aligned to the element size
            entries.append((offset, meta))
            offset += meta.nbytes
        buffer = torch.empty(offset, dtype=torch.uint8)
        if shared:  # a worker: the record crosses to the main process in shared memory
            buffer.share_memory_()
        for value, (start, meta) in zip(self.values, entries):
            target = entry_view(buffer, start, meta)
            if isinstance(value, torch.Tensor):
                target.copy_(value.detach().reshape(meta.shape))
            else:
                target.numpy()[...] = np.asarray(value)
        return buffer, entries


def freeze(value: object) -> Any:
    """A hashable fingerprint of a static argument, equal exactly when the values are.

    Raises:
        UnsupportedOperation: a value that cannot be compared (an arbitrary object).
    """
    if value is None or isinstance(value, bool | int | float | str | bytes | complex):
        return (type(value).__name__, value)
    if isinstance(value, np.generic):
        return ("np", value.dtype.str, value.tobytes())
    if isinstance(value, tuple | list):
        return (type(value).__name__, tuple(freeze(v) for v in value))
    if isinstance(value, slice):
        return ("slice", freeze(value.start), freeze(value.stop), freeze(value.step))
    if value is Ellipsis:
        return ("...",)
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    if isinstance(value, np.ndarray):
        data = np.ascontiguousarray(value).tobytes()
        if len(data) > SMALL_BYTES:
            data = hashlib.blake2b(data, digest_size=16).digest()
        return ("nd", value.dtype.str, value.shape, data)
    if isinstance(value, np.dtype | torch.dtype | torch.device | type):
        return ("t", repr(value))
    try:
        hash(value)
    except TypeError:
        raise UnsupportedOperation(f"argument of type {type(value).__name__}") from None
    return ("obj", type(value).__qualname__, value)


def _ref(
    value: Any, slot: int | str, op: Op, index: dict[int, int], metas: list[Meta], packer: _Packer
) -> tuple[Ref, Any]:
    """How a step reads one argument, and what of it goes into the step's group key."""
    if isinstance(value, Node):
        if value.done:
            return ("x", packer.add(value.value)), ("d", meta_of(value.value))
        j = index[id(value)]
        return ("s", j), ("d", metas[j])
    kind = op.slot_kind(slot, value)
    if kind == DATA and isinstance(value, np.ndarray | torch.Tensor):
        return ("x", packer.add(value)), ("d", meta_of(value))
    if kind == PER_SAMPLE:
        return ("v", value), ("p", np.shape(value), np.asarray(value).dtype.kind)
    return ("v", value), ("c", freeze(value))


def program(root: Node, packer: _Packer) -> list[Step]:
    """The steps computing ``root`` (in dependency order), inputs added to ``packer``.

    Raises:
        UnsupportedOperation: an argument that cannot be compared between samples.
    """
    order: list[Node] = []
    seen: set[int] = set()
    stack: list[tuple[Node, bool]] = [(root, False)]
    while stack:
        node, expanded = stack.pop()
        if id(node) in seen:
            continue
        if expanded or node.done:
            seen.add(id(node))
            if not node.done:
                order.append(node)
            continue
        stack.append((node, True))
        stack.extend((n, False) for n in node.inputs() if id(n) not in seen)
    index = {id(n): j for j, n in enumerate(order)}
    steps: list[Step] = []
    metas: list[Meta] = []
    for node in order:
        op = node.op
        assert op is not None
        arg_refs, arg_keys = [], []
        for position, value in enumerate(node.args):
            r, k = _ref(value, position, op, index, metas, packer)
            arg_refs.append(r)
            arg_keys.append(k)
        kw_refs, kw_keys = [], []
        for name, value in node.kwargs.items():
            r, k = _ref(value, name, op, index, metas, packer)
            kw_refs.append((name, r))
            kw_keys.append((name, k))
        key = (op.key(), tuple(arg_keys), tuple(kw_keys))
        steps.append(Step(op, tuple(arg_refs), tuple(kw_refs), node.meta, key))
        metas.append(node.meta)
    return steps


def _concrete(value: object) -> Any:
    return evaluate(value._node) if isinstance(value, Lazy) else value


def collate_deferred(batch: list[Any], *, collate_fn_map: object = None) -> Any:
    """``default_collate`` of deferred values: a :class:`BatchRecord` (see the module docstring).

    Samples whose values cannot be stacked the way ``default_collate`` stacks them (different
    shapes or dtypes) are forced and collated as ``default_collate`` does, with its errors.
    """
    started = time.perf_counter_ns()
    metas = [v._node.meta if isinstance(v, Lazy) else meta_of(v) for v in batch]
    first = metas[0]
    pending = [isinstance(v, Lazy) and not v._node.done for v in batch]
    if not any(pending) or any(m.shape != first.shape or m.dtype != first.dtype for m in metas):
        if any(pending):
            FORCED.forced("collate", "samples of different shapes or dtypes", None, sum(pending))
        return collate([_concrete(v) for v in batch], collate_fn_map=default_collate_fn_map)
    packer = _Packer()
    programs: list[list[Step] | None] = []
    ready_index: list[int] = []
    for value in batch:
        steps = None
        if isinstance(value, Lazy) and not value._node.done:
            try:
                steps = program(value._node, packer)
            except UnsupportedOperation as e:
                FORCED.forced("collate", str(e), value._node.entry)
            else:
                FORCED.delivered(value._node.entry)
        programs.append(steps)
        ready_index.append(-1 if steps is not None else packer.add(_to_value(value, first)))
    in_worker = torch.utils.data.get_worker_info() is not None
    payload, entries = packer.pack(shared=in_worker)
    record = BatchRecord(first, programs, ready_index, payload, entries, sites=FORCED.take_sites())
    record.worker_ns = time.perf_counter_ns() - started
    return record


def _to_value(value: object, meta: Meta) -> Any:
    """A concrete sample as the kind of value the record delivers (array or tensor)."""
    concrete = _concrete(value)
    if meta.kind == "tensor" and not isinstance(concrete, torch.Tensor):
        return torch.as_tensor(concrete)
    return concrete


deferred.on_stack(collate_deferred)

COLLATE_FN_MAP: dict[Any, Any] = {
    **default_collate_fn_map,
    LazyArray: collate_deferred,
    LazyTensor: collate_deferred,
}
"""torch's ``default_collate_fn_map`` with deferred values added (a copy: torch's stays as it is)."""


def default_collate_deferred(batch: list[Any]) -> Any:
    """``default_collate`` with deferred values collated into :class:`BatchRecord` objects."""
    return collate(normalize(batch), collate_fn_map=COLLATE_FN_MAP)


# -- samples where some positions were forced ----------------------------------------------------


def normalize(samples: list[Any]) -> list[Any]:
    """Make positions holding both deferred and concrete values all deferred (concrete ones
    dressed with :func:`~.deferred.ready`); other mixes force the deferred ones."""
    if not samples or not any(_holds_lazy(s) for s in samples):
        return samples
    return _normalized(samples)


def has_deferred(value: object) -> bool:
    """Whether ``value`` (a sample, a list of samples) holds deferred values."""
    return _holds_lazy(value)


def _normalized(values: list[Any]) -> list[Any]:
    first = values[0]
    if isinstance(first, Lazy) or not all(type(v) is type(first) for v in values):
        return _leaves(values)
    if isinstance(first, tuple | list) and all(len(v) == len(first) for v in values):
        columns = [_normalized([v[i] for v in values]) for i in range(len(first))]
        rows = [list(items) for items in zip(*columns)]
        return [rebuilt(v, row) for v, row in zip(values, rows)]
    if isinstance(first, dict) and all(v.keys() == first.keys() for v in values):
        keys = list(first)
        columns = [_normalized([v[k] for v in values]) for k in keys]
        out = []
        for i, value in enumerate(values):
            clone = dict(value) if type(value) is dict else value.copy()
            clone.update({k: columns[j][i] for j, k in enumerate(keys)})
            out.append(clone)
        return out
    return _leaves(values)


def _leaves(values: list[Any]) -> list[Any]:
    lazy = [isinstance(v, Lazy) for v in values]
    if all(lazy) or not any(lazy):
        return [_forced_nested(v) if not isinstance(v, Lazy) else v for v in values]
    if all(isinstance(v, Lazy | np.ndarray | torch.Tensor) for v in values):
        return [v if isinstance(v, Lazy) else ready(v) for v in values]
    FORCED.forced("collate", "deferred and other values at one position", None, sum(lazy))
    return [_concrete(v) for v in values]


def _forced_nested(value: object) -> Any:
    if not _holds_lazy(value):
        return value
    FORCED.forced("collate", "deferred values inside samples of different structure", None)
    return _force_tree(value)


def _holds_lazy(value: object) -> bool:
    return in_tree(value, Lazy) > 0


def _force_tree(value: object) -> Any:
    """``value`` with every deferred value inside it forced (tuples, lists, dicts)."""
    return resolve_tree(value, _concrete, Lazy)


def force_tree(value: object, reason: str, detail: str, where: str | None = None) -> Any:
    """Every deferred value inside ``value`` forced, counted under ``reason`` (at ``where``)."""
    count = in_tree(value, Lazy, lambda lazy: not lazy._node.done)
    if not count:
        return value
    FORCED.forced(reason, detail, None, count, where=where)
    return _force_tree(value)

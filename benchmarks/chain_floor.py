"""One batch of a pipeline's chain: cv2 per sample, codedag's batched executor, the hand-written
torch floor; and what recording costs in ``__getitem__``.

For the first ``batch_size`` samples of a pipeline's dataset, in this process:

* the samples are made with the batched plan applied inside a deferral block, as a DataLoader
  fetch makes them, and collated into a batch record;
* ``cv2``: the record's programs replayed through the original functions, sample by sample (the
  chain's own work in the unpatched pipeline);
* ``batched``: the record run by :class:`~codedag.backends.batched.executor.BatchExecutor` on the
  device (what the main process does per batch);
* ``hand-written``: :mod:`handwritten`'s version of the chain on the same samples;
* exactness: how far the hand-written and the batched outputs are from ``cv2``'s (the record
  replayed sample by sample): the largest absolute difference and the share of elements beyond
  the tolerance the table (:mod:`codedag.backends.tolerances`) grants the loosest of the chain's
  operations (its ``atol`` and ``rtol``, on the chain's output);
* recording, two ways: *direct*, each sample's recorded operations recorded again through the
  recorder (``deferred.start`` and ``deferred.call``: what deferring costs per operation, without
  the user code around it), each input an array of its own as the decoded image was; and *in* ``__getitem__``: ``__getitem__`` with deferral against
  ``__getitem__`` unpatched, minus the chain's own work (the replay), with ``cv2.imdecode``
  answered from a cache in both (decoding would swamp microseconds).

Timings go through :mod:`codedag.measure` (interleaved pairs, medians, device synchronized).
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import cv2
import numpy as np
import torch
from handwritten import FLOORS
from torch.utils.data import default_collate

import codedag.backends.batched.deferred as deferred_module
from codedag.backends.batched.collate import BatchRecord, Step, default_collate_deferred
from codedag.backends.batched.deferred import collating, deferring
from codedag.backends.batched.delivery import replace_records
from codedag.backends.batched.executor import BatchExecutor, replay
from codedag.backends.tolerances import Tolerance, tolerance_for
from codedag.devices.torch_devices import device_sync
from codedag.measure import Stopwatch
from codedag.measure.launches import LaunchCounter
from codedag.measure.pair import Budget, time_pair
from codedag.migrate.api import PipelineMigrator
from codedag.migrate.batched.fetch import sample_deferred
from codedag.migrate.batched.settings import BatchedSettings

BUDGET = Budget(min_samples=5, max_samples=31, target_ns=300_000_000, max_ns=6_000_000_000)


@dataclass
class Exactness:
    """How far one output is from the per-sample reference.

    Attributes:
        max_abs_diff: the largest absolute difference (``inf``: shapes differ).
        beyond_frac: the share of elements that differ by more than the tolerance allows.
    """

    max_abs_diff: float
    beyond_frac: float


def chain_tolerances(programs: list[list[Step]]) -> list[Tolerance]:
    """The tolerances the table declares for the operations of ``programs`` (distinct)."""
    names = sorted({step.op.name for program in programs for step in program})
    return list({tolerance_for(name): None for name in names})


def exactness(reference: Any, got: Any, tolerances: list[Tolerance]) -> Exactness:
    """How far ``got`` is from ``reference``; an element is beyond tolerance where its difference
    exceeds what every one of ``tolerances`` allows it (``atol`` + ``rtol`` x its magnitude)."""
    ref = np.asarray(reference, dtype=np.float64)
    out = np.asarray(got.detach().cpu() if isinstance(got, torch.Tensor) else got, np.float64)
    if ref.shape != out.shape:
        return Exactness(float("inf"), 1.0)
    if ref.size == 0:
        return Exactness(0.0, 0.0)
    diff = np.abs(out - ref)
    diff[np.isnan(out) & np.isnan(ref)] = 0.0
    allowed = np.max([t.atol + t.rtol * np.abs(ref) for t in tolerances or [Tolerance()]], axis=0)
    return Exactness(float(np.nanmax(diff)), float(np.mean(~(diff <= allowed))))


@dataclass
class ChainFigures:
    """One batch of one pipeline's chain, measured (milliseconds per batch unless named).

    Attributes:
        cv2_ms: the chain's calls per sample with the original libraries.
        batched_ms: codedag's batched executor (main process).
        floor_ms: the hand-written batched torch chain (``None``: no hand-written version).
        floor_exactness: the hand-written chain's output against ``cv2``'s (``None``: none).
        batched_exactness: the batched executor's output against ``cv2``'s.
        record_us_per_sample: what recording the chain's operations costs per sample (direct).
        record_us_per_op: the same per recorded operation.
        getitem_record_us: deferring in ``__getitem__`` (decode cached), per sample.
        collate_us_per_sample: packing the deferred samples into one record, per sample.
        ops_per_sample: recorded operations per sample.
        getitem_us: ``__getitem__`` per sample, unpatched.
        backend_calls: backend calls of the batch.
        groups: distinct programs in the batch.
        samples: deferred samples in the batch.
        aten_ops_per_op: aten ops of the batch run as on a device (whole, no host reads;
            the second run, caches warm) per recorded operation of a sample.
        syncs_per_batch: data-dependent host syncs of that run.
    """

    cv2_ms: float
    batched_ms: float
    floor_ms: float | None
    floor_exactness: Exactness | None
    batched_exactness: Exactness
    record_us_per_sample: float
    record_us_per_op: float
    getitem_record_us: float
    collate_us_per_sample: float
    ops_per_sample: float
    getitem_us: float
    backend_calls: int
    groups: int
    samples: int
    aten_ops_per_op: float = float("nan")
    syncs_per_batch: int = -1

    @property
    def ratio(self) -> float | None:
        """Batched over hand-written (the goal: at most 1.3)."""
        return self.batched_ms / self.floor_ms if self.floor_ms else None


def _records(batch: Any) -> list[BatchRecord]:
    found: list[BatchRecord] = []

    def keep(record: BatchRecord) -> BatchRecord:
        found.append(record)
        return record

    replace_records(batch, keep)
    return found


@contextlib.contextmanager
def cached_decode() -> Iterator[None]:
    """``cv2.imdecode`` answers copies of what it decoded before (same bytes, same flags)."""
    original = cv2.imdecode
    cache: dict[tuple[int, int, int], np.ndarray] = {}

    def imdecode(buf: Any, flags: int) -> Any:
        key = (int(buf.ctypes.data), int(buf.size), int(flags))
        found = cache.get(key)
        if found is None:
            found = cache[key] = original(buf, flags)
        return None if found is None else found.copy()

    cv2.imdecode = imdecode
    try:
        yield
    finally:
        cv2.imdecode = original


def owned_entries(record: BatchRecord) -> dict[int, Any]:
    """Each payload entry as an array of its own, as ``__getitem__`` had it (a view of the
    payload would be copied by the recorder, where a decoded image is recorded in place)."""
    found: dict[int, Any] = {}
    for program in record.programs:
        for step in program or ():
            for _, ref in (*((None, r) for r in step.args), *step.kwargs):
                if ref[0] == "x" and ref[1] not in found:
                    entry = record.host_entry(ref[1])
                    found[ref[1]] = entry.copy() if isinstance(entry, np.ndarray) else entry.clone()
    return found


def rerecord(record: BatchRecord, entries: dict[int, Any]) -> None:
    """Record every deferred sample's steps again (the recorder alone, no user code)."""
    with deferring():
        for program in record.programs:
            if program:
                _rerecord(entries, program)


def _rerecord(entries: dict[int, Any], program: list[Step]) -> Any:
    values: list[Any] = []
    for j, step in enumerate(program):

        def value(ref: Any) -> Any:
            kind, target = ref
            if kind == "s":
                return values[target]
            if kind == "x":
                return entries[target]
            return target

        args = tuple(value(r) for r in step.args)
        kwargs = {k: value(r) for k, r in step.kwargs}
        if j == 0:
            refs = [*zip(args, step.args), *((kwargs[k], r) for k, r in step.kwargs)]
            data = next(a for a, r in refs if r[0] == "x")  # the entry's data, by position or name
            values.append(deferred_module.start(step.op, data, args, kwargs, "benchmark"))
        else:
            values.append(deferred_module.call(step.op, step.op.original, args, kwargs))
    return values[-1]


def measure(name: str, loader: Any, plan: dict[str, Any], device: str) -> ChainFigures | None:
    """The figures of one batch of ``loader``'s first samples (``None``: nothing deferred)."""
    dataset = loader.dataset
    indices = list(range(min(loader.batch_size, len(dataset))))
    dev = torch.device(device)
    watch = Stopwatch(sync=device_sync(dev))

    collate_fn = loader.collate_fn

    def original() -> Any:
        return collate_fn([dataset[i] for i in indices])

    def collated(samples: list[Any]) -> Any:
        with deferring(enabled=False):
            if collate_fn is default_collate:
                return default_collate_deferred(samples)
            with collating():  # a custom collate_fn stacking deferred samples
                return collate_fn(samples)

    stack = contextlib.ExitStack()
    stack.enter_context(cached_decode())
    migrator = PipelineMigrator.from_plan(
        plan, default_device=device, guard=False, batched=BatchedSettings(verify=0)
    )
    with migrator:

        def deferred_samples() -> list[Any]:  # as the loader's fetch records them
            return [sample_deferred(functools.partial(dataset.__getitem__, i)) for i in indices]

        def deferred() -> Any:
            return collated(deferred_samples())

        getitem = time_pair(original, deferred_samples, watch, BUDGET)
        with deferring():
            samples = [dataset[i] for i in indices]
            collate = time_pair(
                lambda: collated(samples),
                lambda: collated(samples),
                watch,
                Budget(min_samples=3, max_samples=7, target_ns=0),
            )
        records = _records(deferred())
    stack.close()
    if not records:
        return None
    record = records[0]
    programs = [p for p in record.programs if p]
    if not programs:
        return None
    executor = BatchExecutor(dev)

    def chain_cv2() -> None:
        for i in range(record.n):
            replay(record, i)

    cv2_pair = time_pair(chain_cv2, lambda: executor.run(record), watch, BUDGET)
    outcome = executor.run(record)
    reference = np.stack([np.asarray(_as_numpy(replay(record, i))) for i in range(record.n)])
    tolerances = chain_tolerances(programs)
    floor_ms = None
    floor_exactness = None
    floor = FLOORS.get(name)
    if floor is not None:
        inputs = [floor.prepare(dataset, i) for i in indices]
        floor_pair = time_pair(
            lambda: floor.run(inputs, dev), lambda: executor.run(record), watch, BUDGET
        )
        floor_ms = floor_pair.a.median_ns / 1e6
        floor_exactness = exactness(reference, floor.run(inputs, dev), tolerances)
    n = len(indices)
    ops = sum(len(p) for p in programs) / len(programs)
    chain_ns = cv2_pair.a.median_ns
    in_getitem_ns = getitem.b.median_ns - (getitem.a.median_ns - chain_ns)
    entries = owned_entries(record)
    direct = time_pair(
        lambda: rerecord(record, entries), lambda: rerecord(record, entries), watch, BUDGET
    )
    record_ns = direct.a.median_ns * n / len(programs)
    as_device = BatchExecutor(dev, chunk_bytes=0, sync_free=True)
    as_device.run(record)
    with LaunchCounter() as counted:
        as_device.run(record)
    return ChainFigures(
        cv2_ms=chain_ns / 1e6,
        batched_ms=cv2_pair.b.median_ns / 1e6,
        floor_ms=floor_ms,
        floor_exactness=floor_exactness,
        batched_exactness=exactness(reference, outcome.tensor, tolerances),
        record_us_per_sample=record_ns / n / 1e3,
        record_us_per_op=record_ns / n / 1e3 / ops,
        getitem_record_us=in_getitem_ns / n / 1e3,
        collate_us_per_sample=collate.a.median_ns / n / 1e3,
        ops_per_sample=ops,
        getitem_us=getitem.a.median_ns / n / 1e3,
        backend_calls=outcome.backend_calls,
        groups=outcome.groups,
        samples=len(programs),
        aten_ops_per_op=counted.total_ops / ops,
        syncs_per_batch=counted.total_syncs,
    )


def _as_numpy(value: Any) -> Any:
    return value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value

"""aten ops and host syncs of batched chains: the example pipelines' batch records, run by the
executor under :class:`codedag.measure.launches.LaunchCounter`.

The records are made as a DataLoader fetch makes them (the plan applied, samples recorded in a
deferral block, collated), then run on the CPU as a device runs them: the whole batch at once
(no CPU chunks), so the counts are those of one device batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from codedag.backends.batched.collate import BatchRecord, default_collate_deferred
from codedag.backends.batched.deferred import deferring
from codedag.backends.batched.delivery import replace_records
from codedag.backends.batched.executor import BatchExecutor, replay
from codedag.experiments.pipelines import demo_image, letterbox
from codedag.measure.launches import LaunchCounter
from codedag.migrate.api import PipelineMigrator
from codedag.migrate.batched.settings import BatchedSettings

DEMO_CHAIN = ["cv2.resize", "cv2.cvtColor", "cv2.flip", "cv2.warpAffine"]
LETTERBOX_CHAIN = ["cv2.resize", "cv2.copyMakeBorder", "cv2.cvtColor", "cv2.GaussianBlur"]
PIPELINES: dict[str, tuple[Any, list[str], dict[str, int]]] = {
    "demo_image": (demo_image, DEMO_CHAIN, {"image_size": 32, "source_size": 64}),
    "letterbox": (letterbox, LETTERBOX_CHAIN, {"img_size": 32, "min_size": 40, "max_size": 64}),
}


def _plan(functions: list[str]) -> dict[str, Any]:
    chain = {
        "id": "chain0",
        "functions": functions,
        "entries": [],
        "entry_functions": [functions[0]],
        "batched": True,
    }
    return {
        "schema_version": 2,
        "context_device_map": {},
        "calls": [],
        "batched": {"mode": "always", "device": "cpu", "chains": [chain]},
    }


def records(name: str, batches: int = 3, batch_size: int = 8, **sizes: int) -> list[BatchRecord]:
    """``batches`` batch records of pipeline ``name`` (``demo_image``, ``letterbox``)."""
    module, functions, defaults = PIPELINES[name]
    dataset = module.make_dataset(n=batches * batch_size, seed=3, **{**defaults, **sizes})
    return chain_records(functions, dataset.__getitem__, batches, batch_size)


def chain_records(
    functions: list[str], sample: Callable[[int], Any], batches: int, batch_size: int
) -> list[BatchRecord]:
    """Batch records of ``sample(i)`` with the chain ``functions`` placed for batched execution
    (samples ``b * batch_size`` onwards make batch ``b``)."""
    migrator = PipelineMigrator.from_plan(
        _plan(functions), guard=False, batched=BatchedSettings(verify=0)
    )
    found: list[BatchRecord] = []

    def keep(record: BatchRecord) -> BatchRecord:
        found.append(record)
        return record

    with migrator:
        for b in range(batches):
            with deferring():
                samples = [sample(i) for i in range(b * batch_size, (b + 1) * batch_size)]
            with deferring(enabled=False):
                replace_records(default_collate_deferred(samples), keep)
    return found


@dataclass
class ChainCounts:
    """What one pipeline's batches asked of torch.

    Attributes:
        steps: recorded operations per sample (the chain's ops), averaged over samples.
        ops_per_batch: aten ops of each batch.
        syncs_per_batch: data-dependent host syncs of each batch.
        sync_names: the syncs of the steady batches (after the first) by op.
        outputs: each batch's output.
        failed: samples whose group's backend failed (they ran their CPU replay).
    """

    steps: float
    ops_per_batch: list[int]
    syncs_per_batch: list[int]
    sync_names: dict[str, int] = field(default_factory=dict)
    outputs: list[torch.Tensor] = field(default_factory=list)
    failed: int = 0

    @property
    def ops_per_chain_op(self) -> float:
        """aten ops per chain op in the steady batches (the largest)."""
        return max(self.ops_per_batch[1:] or self.ops_per_batch) / self.steps

    @property
    def steady_syncs(self) -> int:
        """Host syncs of the worst steady batch (after the first)."""
        return max(self.syncs_per_batch[1:] or [0])


def count(batch_records: list[BatchRecord], fuse: bool = True) -> ChainCounts:
    """Runs every record once (the whole batch, as on a device) under a counter."""
    executor = BatchExecutor("cpu", fuse=fuse, chunk_bytes=0, sync_free=True)
    programs = [p for r in batch_records for p in r.programs if p]
    steps = sum(len(p) for p in programs) / max(len(programs), 1)
    counts = ChainCounts(steps, [], [])
    sync_names: dict[str, int] = {}
    for i, record in enumerate(batch_records):
        with LaunchCounter() as counted:
            outcome = executor.run(record)
        out = outcome.tensor
        counts.failed += len(outcome.failed)
        counts.ops_per_batch.append(counted.total_ops)
        counts.syncs_per_batch.append(counted.total_syncs)
        counts.outputs.append(out)
        if i:
            for key, value in counted.syncs.items():
                sync_names[key] = max(sync_names.get(key, 0), value)
    counts.sync_names = sync_names
    return counts


def reference(record: BatchRecord) -> np.ndarray:
    """The record's samples replayed one by one through the original functions, stacked."""
    rows = []
    for i in range(record.n):
        value = replay(record, i)
        rows.append(value.numpy() if isinstance(value, torch.Tensor) else np.asarray(value))
    return np.stack(rows)

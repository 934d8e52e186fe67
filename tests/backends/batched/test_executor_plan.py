"""The batched executor's plan: value-wise runs on uint8 fused into one table look-up, the CPU's
chunks, groups that differ by an optional step meeting again; each exactly the per-sample
result."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import cv2
import numpy as np
import pytest
import torch

import codedag.backends.batched.fusion as fusion
from codedag.backends.batched.collate import BatchRecord, default_collate_deferred
from codedag.backends.batched.deferred import deferring
from codedag.backends.batched.executor import BatchExecutor, replay
from codedag.backends.batched.wrappers import EntryMatcher, chain_function

RESIZE = chain_function("cv2.resize", cv2.resize, EntryMatcher("cv2.resize", [], []))
FLIP = chain_function("cv2.flip", cv2.flip, None)
MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


def _normalize(x: Any) -> Any:
    return np.transpose((x.astype(np.float32) / 255.0 - MEAN) / STD, (2, 0, 1))


def _record(chain: Callable[[Any, int], Any], n: int = 6, size: int = 20) -> BatchRecord:
    rng = np.random.default_rng(3)
    images = [rng.integers(0, 256, (size, size + 4, 3), dtype=np.uint8) for _ in range(n)]
    with deferring():
        samples = [chain(RESIZE(image, (12, 10)), i) for i, image in enumerate(images)]
        record = default_collate_deferred(samples)
    assert isinstance(record, BatchRecord)
    return record


def _reference(record: BatchRecord) -> torch.Tensor:
    return torch.stack(
        [torch.as_tensor(np.ascontiguousarray(replay(record, i))) for i in range(record.n)]
    )


CHAINS: dict[str, Callable[[Any, int], Any]] = {
    "normalize": lambda x, i: _normalize(x),
    "reflected int": lambda x, i: (255 - x).astype(np.float32) * 0.5,
    "clip back to uint8": lambda x, i: np.clip(x * 1.5 + 10, 0, 255).astype(np.uint8),
    "comparison": lambda x, i: (x > 100).astype(np.float32),
    "random flip then normalize": lambda x, i: _normalize(FLIP(x, 1) if i % 2 else x),
}


@pytest.mark.parametrize("name", sorted(CHAINS))
def test_fused_runs_equal_the_samples_bit_for_bit(name: str) -> None:
    record = _record(CHAINS[name])
    expected = _reference(record)
    fused = BatchExecutor("cpu").run(record)
    plain = BatchExecutor("cpu", fuse=False).run(record)
    assert torch.equal(fused.tensor, expected)
    assert torch.equal(plain.tensor, expected)
    assert fused.backend_calls < plain.backend_calls  # the run became one call


def test_a_run_is_a_table_only_where_every_step_reads_the_previous_one() -> None:
    def twice(x: Any, i: int) -> Any:
        y = x.astype(np.float32)
        return y / 255.0 + y  # y is read twice: the run stops before it

    record = _record(twice)
    program = record.programs[0]
    assert program is not None
    plan = fusion.plan(program)
    assert not any(isinstance(s.op, fusion.TableOp) for s in plan.steps)
    assert torch.equal(BatchExecutor("cpu").run(record).tensor, _reference(record))


def test_fused_tables_follow_the_constants_along_their_axes() -> None:
    record = _record(lambda x, i: (x.astype(np.float32) - MEAN) / STD)
    program = record.programs[0]
    assert program is not None
    steps = fusion.plan(program).steps
    tables = [s.op for s in steps if isinstance(s.op, fusion.TableOp)]
    assert len(tables) == 1 and tuple(tables[0].table.shape) == (256, 1, 1, 3)


@pytest.mark.parametrize("chunk_bytes", [1, 1 << 14])
def test_chunks_on_the_cpu_give_the_same_batch(chunk_bytes: int) -> None:
    record = _record(CHAINS["random flip then normalize"], n=7)
    whole = BatchExecutor("cpu", fuse=False, chunk_bytes=0).run(record)
    chunked = BatchExecutor("cpu", fuse=False, chunk_bytes=chunk_bytes).run(record)
    assert torch.equal(whole.tensor, chunked.tensor)
    assert chunked.groups == whole.groups == 2
    if chunk_bytes == 1:  # one sample per chunk: every step once per sample
        assert chunked.backend_calls == sum(len(p) for p in record.programs if p)


def test_groups_differing_by_an_optional_step_meet_again() -> None:
    record = _record(lambda x, i: _normalize(FLIP(x, 1) if i % 2 else x), n=8)
    outcome = BatchExecutor("cpu", fuse=False, chunk_bytes=0).run(record)
    longest = max(len(p) for p in record.programs if p)
    assert outcome.groups == 2
    assert outcome.backend_calls == longest  # the flip once, every other step once for all
    assert torch.equal(outcome.tensor, _reference(record))


def test_a_batch_copied_as_a_device_would_is_uploaded_once() -> None:
    from codedag.backends.batched.transfer import DeviceIO

    record = _record(CHAINS["reflected int"], n=7)
    io = DeviceIO("cpu", simulate=True)
    outcome = BatchExecutor("cpu", io, chunk_bytes=1).run(record)
    assert io.h2d_bytes == record.payload.numel()  # one payload copy, no chunks
    assert torch.equal(outcome.tensor, _reference(record))


def test_entries_read_out_of_order_are_rows_of_one_view_where_they_share_a_shape() -> None:
    from codedag.backends.batched.executor import _grid

    record = _record(CHAINS["random flip then normalize"], n=6)
    meta = record.entries[0][1]
    assert _grid(record, [0, 2, 4, 1, 3, 5], meta) == (record.entries[0][0], [0, 2, 4, 1, 3, 5])
    assert _grid(record, [3, 1], meta) == (record.entries[1][0], [2, 0])

    rng = np.random.default_rng(5)
    ragged = [rng.integers(0, 256, (8 + i, 9, 3), dtype=np.uint8) for i in range(3)]
    with deferring():
        record = default_collate_deferred([RESIZE(image, (6, 5)) for image in ragged])
    assert isinstance(record, BatchRecord)
    assert _grid(record, [2, 0], record.entries[0][1]) is None  # shapes differ: stacked
    assert torch.equal(BatchExecutor("cpu").run(record).tensor, _reference(record))

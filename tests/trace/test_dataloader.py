"""Tracing a DataLoader's first batch: only the last of the warm-up runs is traced, every run
sees the same batch, the random state is put back, and worker 0's first task is replayed in
the process."""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterable, Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.errors import ConfigError, TraceError
from codedag.trace.dataloader import _plain_index, trace_first_batch


class CountingTracer:
    """A BatchTracer that counts its windows."""

    def __init__(self) -> None:
        self.windows = 0
        self.dag = SimpleNamespace(metadata={})

    @contextlib.contextmanager
    def tracing_context(self, reach: Iterable[object] = ()) -> Iterator[None]:
        self.windows += 1
        yield


class Noisy(Dataset):
    """Items that depend on the global random state (as augmentations do)."""

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> Any:
        return torch.tensor([float(index), float(np.random.rand()), random.random()])


def test_warm_up_runs_are_untraced_and_see_the_same_batch_as_the_traced_one() -> None:
    loader = DataLoader(Noisy(), batch_size=4, shuffle=True)
    tracer = CountingTracer()
    np.random.seed(0)
    before = np.random.get_state()[1].copy()
    batch = trace_first_batch(loader, tracer, warmup=2)
    assert tracer.windows == 1
    assert np.array_equal(np.random.get_state()[1], before)  # the random state is put back
    again = trace_first_batch(loader, CountingTracer(), warmup=0)
    assert torch.equal(batch, again)
    meta = tracer.dag.metadata["dataloader"]
    assert meta["warmup"] == 2 and meta["reproduced_in_process"] is False
    assert meta["dataset"] == "Noisy" and meta["batch_size"] == 4


def test_worker_zeros_first_task_is_replayed_in_the_process() -> None:
    generator = torch.Generator().manual_seed(5)
    loader = DataLoader(Noisy(), batch_size=4, shuffle=True, num_workers=2, generator=generator)
    tracer = CountingTracer()
    batch = trace_first_batch(loader, tracer)
    meta = tracer.dag.metadata["dataloader"]
    assert meta["reproduced_in_process"] is True and meta["worker_id"] == 0
    assert [int(i) for i in batch[:, 0]] == meta["batch_indices"]
    # the iterator draws from the loader's generator the same way with and without workers
    plain = DataLoader(
        Noisy(), batch_size=4, shuffle=True, generator=torch.Generator().manual_seed(5)
    )
    assert meta["batch_indices"] == [int(i) for i in next(iter(plain))[:, 0]]


def test_a_sub_batch_is_the_first_samples_with_the_draws_they_get_in_the_whole_batch() -> None:
    generator = torch.Generator().manual_seed(5)
    loader = DataLoader(Noisy(), batch_size=6, shuffle=True, num_workers=2, generator=generator)
    whole = trace_first_batch(loader, CountingTracer())
    tracer = CountingTracer()
    first = trace_first_batch(loader, tracer, samples=3)
    assert torch.equal(first, whole[:3])  # indices and random draws: worker 0's, as in the batch
    assert tracer.dag.metadata["dataloader"]["batch_indices"] == [int(i) for i in whole[:3, 0]]
    assert tracer.dag.metadata["dataloader"]["batch_size"] == 6  # the loader's, for the plan
    plain = DataLoader(Noisy(), batch_size=6, shuffle=True)
    np.random.seed(1)
    random.seed(1)
    indices = [4, 0, 9, 2, 7, 1]
    fetched = trace_first_batch(plain, CountingTracer(), warmup=0, indices=indices)
    np.random.seed(1)
    random.seed(1)
    part = trace_first_batch(plain, CountingTracer(), warmup=0, indices=indices, samples=2)
    assert torch.equal(part, fetched[:2]) and [int(i) for i in part[:, 0]] == [4, 0]
    assert torch.equal(trace_first_batch(plain, CountingTracer(), samples=2), next(iter(plain)))


def test_bad_inputs_get_one_clear_error() -> None:
    with pytest.raises(TraceError, match="expected a torch"):
        trace_first_batch([1, 2], CountingTracer())  # type: ignore[arg-type]
    loader = DataLoader(Noisy(), batch_size=4)
    with pytest.raises(ConfigError, match="warmup"):
        trace_first_batch(loader, CountingTracer(), warmup=-1)
    with pytest.raises(ConfigError, match="samples"):
        trace_first_batch(loader, CountingTracer(), samples=0)
    with pytest.raises(TraceError, match="empty"):
        trace_first_batch(DataLoader([], batch_size=2), CountingTracer())


def test_indices_are_kept_as_plain_ints_or_their_repr() -> None:
    assert _plain_index(np.int64(3)) == 3 and type(_plain_index(torch.tensor(2))) is int
    assert _plain_index("key") == "'key'"

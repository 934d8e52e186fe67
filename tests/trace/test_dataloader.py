"""Tracing a DataLoader's first batch: only the last of the warm-up runs is traced, every run
sees the same batch, the random state is put back, and worker 0's first task is replayed in
the process."""

from __future__ import annotations

import contextlib
import random
import weakref
from collections.abc import Iterable, Iterator
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.errors import ConfigError, TraceError
from codedag.trace.dataloader import (
    ISOLATED_BYTES,
    _plain_index,
    isolated,
    trace_first_batch,
    unfetched_indices,
)


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


class Remembering(Dataset):  # type: ignore[type-arg]
    """Items computed once and then kept, with a handle opened at the first item (as data sets
    open an HDF5 or LMDB file in each worker) and a count of items computed."""

    def __init__(self) -> None:
        self.kept: dict[int, Any] = {}
        self.handle: object | None = None
        self.computed = 0

    def __len__(self) -> int:
        return 16

    def __getitem__(self, index: int) -> Any:
        if self.handle is None:
            self.handle = object()
        if index not in self.kept:
            self.computed += 1
            self.kept[index] = torch.tensor([float(index), float(np.random.rand())])
        return self.kept[index]


@pytest.mark.parametrize("workers", [0, 2])
def test_warm_up_runs_fetch_other_samples_and_the_data_set_is_left_as_it_was(workers: int) -> None:
    """A data set that keeps what it computed would hand the traced run its warm-up's values
    (no call to trace); the runs use a copy, so nothing of them stays in the script's data set
    (a handle its workers would inherit, kept values, a count)."""
    dataset = Remembering()
    loader = DataLoader(dataset, batch_size=4, shuffle=True, num_workers=workers)
    computed: list[int] = []

    class Counting(CountingTracer):
        @contextlib.contextmanager
        def tracing_context(self, reach: Iterable[object] = ()) -> Iterator[None]:
            (copy,) = [r for r in reach if isinstance(r, Remembering)]
            before = copy.computed
            with super().tracing_context(reach):
                yield
            computed.append(copy.computed - before)

    trace_first_batch(loader, Counting(), warmup=1)
    assert computed == [4]  # every traced sample computed, none handed back from the warm-up's
    assert (dataset.handle, dataset.kept, dataset.computed) == (None, {}, 0)


def test_unfetched_indices_skip_the_fetched_ones_in_the_samplers_order() -> None:
    sequential = DataLoader(Noisy(), batch_size=4)
    assert unfetched_indices(sequential, [0, 1, 2, 3], 6) == [4, 5, 6, 7, 8, 9]
    assert unfetched_indices(sequential, [0, 1, 2, 3], 2) == [4, 5]
    shuffled = DataLoader(Noisy(), batch_size=4, shuffle=True)
    others = unfetched_indices(shuffled, [3, 5, 7, 9], 8)
    assert len(set(others)) == 8 and not set(others) & {3, 5, 7, 9}
    one_key = DataLoader(Noisy(), batch_size=None)  # no batch sampler: one key per fetch
    assert unfetched_indices(one_key, 0, 4) == 1
    tiny = DataLoader(Noisy(), batch_size=16)  # within 1 batch, every index was fetched
    assert unfetched_indices(tiny, list(range(16)), 4) == list(range(16))
    unhashable = [[0], [1]]
    assert unfetched_indices(sequential, unhashable, 2) is unhashable


class EpochBatches:
    """A batch sampler that seeds its order with the epochs it counted, as multi-scale training
    samplers do, and yields ``(index, size)`` items."""

    def __init__(self, n: int, batch: int) -> None:
        self.n, self.batch, self.epoch = n, batch, 0
        self.generator = torch.Generator()

    def __iter__(self) -> Iterator[list[tuple[int, int]]]:
        self.generator.manual_seed(self.epoch)
        self.epoch += 1
        order = torch.randperm(self.n, generator=self.generator).tolist()
        for start in range(0, self.n, self.batch):
            yield [(i, 96 + 32 * (start % 3)) for i in order[start : start + self.batch]]

    def __len__(self) -> int:
        return -(-self.n // self.batch)


class Sized(Dataset):
    def __len__(self) -> int:
        return 12

    def __getitem__(self, item: tuple[int, int]) -> torch.Tensor:
        index, size = item
        return torch.full((2,), float(index * size))


def test_indices_drawn_for_tracing_leave_a_batch_samplers_own_state_alone() -> None:
    sampler = EpochBatches(12, 4)
    loader = DataLoader(Sized(), batch_sampler=sampler)
    next(iter(loader))  # the script's first batch: epoch 0's order
    fetched = next(iter(EpochBatches(12, 4)))
    others = unfetched_indices(loader, fetched, 4)
    assert len(others) == 4 and not set(others) & set(fetched)
    trace_first_batch(loader, CountingTracer(), warmup=1, indices=fetched)
    assert sampler.epoch == 1
    expected = EpochBatches(12, 4)
    expected.epoch = 1  # the script's next epoch: epoch 1's order, not epoch 3's
    batches = [[Sized()[item].tolist() for item in batch] for batch in expected]
    assert [batch.tolist() for batch in loader] == batches


def test_isolated_copies_a_picklable_data_set_only() -> None:
    loader = DataLoader(Remembering(), batch_size=4)
    view = isolated(loader)
    assert view.dataset is not loader.dataset and isinstance(view.dataset, Remembering)
    assert view.sampler is loader.sampler and view.batch_size == 4
    lambdas = Remembering()
    lambdas.handle = lambda: None  # not picklable: the data set itself
    assert isolated(DataLoader(lambdas)).dataset is lambdas
    in_memory = Remembering()
    in_memory.kept[0] = np.zeros(ISOLATED_BYTES + 1, np.uint8)  # samples held in memory
    assert isolated(DataLoader(in_memory)).dataset is in_memory


class _Batch(list):  # type: ignore[type-arg]
    """A collated batch a weak reference can follow."""


def test_the_traced_run_loads_after_the_warm_up_batch_was_freed() -> None:
    """A training loop has freed earlier batches by the time it loads the next: the allocator
    has taken their memory back for reuse, where a process's first large arrays each get new
    pages from the kernel (a traced 96^3 volume's casts read 10 times their time in the loop).
    The traced run starts with the warm-up batch freed."""
    alive: list[bool] = []
    warm: list[Any] = []

    class Samples(Dataset):  # type: ignore[type-arg]
        def __len__(self) -> int:
            return 8

        def __getitem__(self, index: int) -> int:
            if index < 4:  # the traced batch: is the warm-up batch still held?
                alive.append(any(ref() is not None for ref in warm))
            return index

    def collate(items: list[int]) -> _Batch:
        batch = _Batch(items)
        if items[0] >= 4:
            warm.append(weakref.ref(batch))
        return batch

    loader = DataLoader(Samples(), batch_size=4, collate_fn=collate)
    batch = trace_first_batch(loader, CountingTracer(), warmup=1)
    assert batch == [0, 1, 2, 3] and len(warm) == 1
    assert alive == [False] * 4

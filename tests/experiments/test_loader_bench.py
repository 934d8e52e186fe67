"""Side-by-side loader timing: warm-up, alternating rounds, steady state, batch comparison."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.experiments.loader_bench import (
    compare_batches,
    compare_variants,
    in_flight,
    no_context,
    steady_s,
)


class Sleepy(Dataset):
    def __init__(self, delay_s: float, offset: float = 0.0) -> None:
        self.delay_s, self.offset = delay_s, offset

    def __len__(self) -> int:
        return 40

    def __getitem__(self, i: int) -> tuple[torch.Tensor, int]:
        time.sleep(self.delay_s)
        return torch.full((2,), float(i) + self.offset), i


def test_variants_are_warmed_up_then_timed_in_alternating_rounds() -> None:
    order: list[str] = []

    def context(name: str) -> contextlib.AbstractContextManager[None]:
        @contextlib.contextmanager
        def entered() -> Iterator[None]:
            order.append(name)
            yield

        return entered()

    fast = lambda: DataLoader(Sleepy(0.0), batch_size=4)  # noqa: E731
    slow = lambda: DataLoader(Sleepy(0.01), batch_size=4)  # noqa: E731
    out = compare_variants(
        {"fast": (fast, lambda: context("fast")), "slow": (slow, lambda: context("slow"))},
        batches=5,
        rounds=3,
    )
    assert order == ["fast", "slow", "fast", "slow", "slow", "fast", "fast", "slow"]
    assert len(out["fast"].round_s) == len(out["slow"].round_s) == 3
    assert out["slow"].median_s > out["fast"].median_s  # 40 ms of sleep per batch vs none
    assert len(out["fast"].batches) == 5 and out["fast"].spread_s >= 0


def test_steady_state_leaves_out_prefetched_batches() -> None:
    loader = DataLoader(Sleepy(0.02), batch_size=2, num_workers=2, prefetch_factor=2)
    assert in_flight(loader) == 4 and in_flight(DataLoader(Sleepy(0.0))) == 0
    # two workers, 40 ms per batch each: about 20 ms per batch in steady state, not the ~0 ms of
    # the batches that were waiting, prefetched, when the first one arrived
    assert steady_s(lambda: loader, 14) > 0.01


def test_batches_are_compared_leaf_by_leaf() -> None:
    a = [(torch.zeros(3), np.array([1, 2])), (torch.ones(3), np.array([3, 4]))]
    same = compare_batches(
        a, [(torch.zeros(3), np.array([1, 2])), (torch.ones(3), np.array([3, 4]))]
    )
    assert same.identical and same.compared == 2 and same.max_abs_diff == 0
    off = compare_batches(
        a, [(torch.zeros(3) + 0.5, np.array([1, 2])), (torch.ones(3), np.array([3, 5]))]
    )
    assert not off.identical and off.max_abs_diff == 1.0
    assert set(off.differing) == {"[0]", "[1]"}
    shorter = compare_batches(a, a[:1])
    assert "<batch count>" in shorter.differing
    assert no_context().__enter__() is None

"""The benchmarks' shared helpers: side-by-side loader timing (warm-up, interleaved rounds,
steady state, the rule of codedag.measure), batch comparison, pipeline sizes."""

from __future__ import annotations

import contextlib
import importlib.util
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.measure import Verdict


def _load_common() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "benchmarks" / "common.py"
    spec = importlib.util.spec_from_file_location("benchmarks_common", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


common = _load_common()
compare_batches = common.compare_batches
compare_variants = common.compare_variants
in_flight = common.in_flight
no_context = common.no_context
steady_s = common.steady_s


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
    assert out["fast"].versus(out["slow"]).verdict is Verdict.FASTER
    assert out["slow"].versus(out["fast"]).verdict is Verdict.SLOWER


def test_rounds_that_disagree_are_reported() -> None:
    steady = common.LoaderTiming("steady", [0.010, 0.0101, 0.0099])
    jumpy = common.LoaderTiming("jumpy", [0.010, 0.050, 0.011])
    assert common.disturbed({"steady": steady}) == []
    (line,) = common.disturbed({"steady": steady, "jumpy": jumpy})
    assert line.startswith("jumpy: 3 samples spread by")


def test_pipeline_sizes_follow_one_image_side() -> None:
    assert common.pipeline_sizes("yolo_mosaic", 97) == {"img_size": 96}
    assert common.pipeline_sizes("mel", 64) == {} and common.pipeline_sizes("letterbox", None) == {}
    with pytest.raises(ValueError, match="at least 32"):
        common.pipeline_sizes("letterbox", 8)


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

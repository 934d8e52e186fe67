"""Measuring a DataLoader side by side with and without a change (a plan, a loader setting).

Used by the benchmarks (``benchmarks/placement.py``, ``batched.py``, ``loader_tune.py``): each
variant is timed in alternating rounds (A B A B ...) so both see the same machine state, the first
batch of every round (worker start-up) is left out, and the batches of the first round are kept so
outputs can be compared element by element.
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class LoaderTiming:
    """Per-batch times of one variant over several rounds.

    Attributes:
        name: the variant's name.
        batch_s: every timed batch (seconds), first batch of each round excluded.
        batches: the batches of the first round (CPU copies), for comparisons.
    """

    name: str
    batch_s: list[float] = field(default_factory=list)
    batches: list[Any] = field(default_factory=list)

    @property
    def median_s(self) -> float:
        """Median time per batch."""
        return statistics.median(self.batch_s) if self.batch_s else float("nan")

    @property
    def mean_s(self) -> float:
        """Mean time per batch."""
        return statistics.fmean(self.batch_s) if self.batch_s else float("nan")


def _copy(batch: Any) -> Any:
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.detach().cpu().clone()
    if isinstance(batch, np.ndarray):
        return batch.copy()
    if isinstance(batch, tuple | list):
        return type(batch)(_copy(b) for b in batch)
    if isinstance(batch, dict):
        return {k: _copy(v) for k, v in batch.items()}
    return batch


def run_round(
    make_loader: Callable[[], Any], batches: int, keep: bool
) -> tuple[list[float], list[Any]]:
    """Iterate ``batches`` batches of a fresh loader; per-batch times after the first."""
    loader = make_loader()
    times: list[float] = []
    kept: list[Any] = []
    iterator = iter(loader)
    t0 = time.perf_counter()
    for i in range(batches):
        try:
            batch = next(iterator)
        except StopIteration:
            break
        t1 = time.perf_counter()
        if i:
            times.append(t1 - t0)
        if keep:
            kept.append(_copy(batch))
        t0 = time.perf_counter()
    del iterator
    return times, kept


def compare_variants(
    variants: dict[str, tuple[Callable[[], Any], Callable[[], Any]]],
    batches: int,
    rounds: int,
) -> dict[str, LoaderTiming]:
    """Time each variant in alternating rounds.

    Args:
        variants: name -> ``(make_loader, context)``; ``context()`` is entered around each round
            (a migrator's ``with``), ``contextlib.nullcontext`` for none.
        batches: batches per round (the first one is not timed).
        rounds: rounds per variant.
    """
    out = {name: LoaderTiming(name) for name in variants}
    for r in range(rounds):
        order = list(variants) if r % 2 == 0 else list(reversed(variants))
        for name in order:
            make_loader, context = variants[name]
            with context():
                times, kept = run_round(make_loader, batches, keep=r == 0)
            out[name].batch_s.extend(times)
            if r == 0:
                out[name].batches = kept
    return out


def no_context() -> contextlib.AbstractContextManager[None]:
    """A context that does nothing."""
    return contextlib.nullcontext()


def _leaves(batch: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    if isinstance(batch, tuple | list):
        for i, item in enumerate(batch):
            yield from _leaves(item, f"{prefix}[{i}]")
    elif isinstance(batch, dict):
        for key, item in batch.items():
            yield from _leaves(item, f"{prefix}[{key!r}]")
    else:
        yield prefix, batch


@dataclass
class BatchComparison:
    """How two runs' batches differ.

    Attributes:
        identical: every leaf equal bit for bit.
        max_abs_diff: largest elementwise difference of float leaves.
        differing: leaves (``[0][1]``-style paths) that differ, with their largest difference.
        compared: batches compared.
    """

    identical: bool
    max_abs_diff: float
    differing: dict[str, float]
    compared: int


def compare_batches(reference: list[Any], other: list[Any]) -> BatchComparison:
    """Compare batch lists leaf by leaf (tensors and arrays elementwise, the rest with ``==``)."""
    import torch

    differing: dict[str, float] = {}
    worst = 0.0
    for ref, got in zip(reference, other):
        mine = dict(_leaves(got))
        for path, a in _leaves(ref):
            b = mine.get(path)
            if isinstance(a, torch.Tensor | np.ndarray):
                a_np = a.numpy() if isinstance(a, torch.Tensor) else a
                b_np = b.numpy() if isinstance(b, torch.Tensor) else np.asarray(b)
                if a_np.shape != b_np.shape or a_np.dtype != b_np.dtype:
                    differing[path] = float("inf")
                    continue
                if np.array_equal(a_np, b_np, equal_nan=a_np.dtype.kind in "fc"):
                    continue
                diff = float(np.nanmax(np.abs(a_np.astype(np.float64) - b_np.astype(np.float64))))
                differing[path] = max(differing.get(path, 0.0), diff)
                worst = max(worst, diff)
            elif a != b:
                differing[path] = float("inf")
    if len(reference) != len(other):
        differing["<batch count>"] = float("inf")
    return BatchComparison(not differing, worst, differing, min(len(reference), len(other)))

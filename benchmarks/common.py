"""Helpers shared by the benchmark scripts, built on :mod:`codedag.measure`.

* example pipelines sized from one image side (:func:`pipeline_sizes`, :func:`make_loader`);
* a DataLoader timed side by side with and without a change (a plan, a loader setting):
  :func:`compare_variants` warms each variant up with one untimed round (one-time costs: JIT
  compilation, caches, lazy imports; its batches are kept so outputs can be compared element by
  element), then times the variants in interleaved rounds (A B, B A, ...: the order of
  :func:`codedag.measure.round_order`) so all see the same machine state. A round's figure is its
  steady-state time per batch: the first batch (worker start-up) and the batches the workers had
  prefetched meanwhile are left out, the rest averaged. A variant's figure is the median of its
  rounds, and variants are judged by the rule of :mod:`codedag.measure`
  (:meth:`LoaderTiming.versus`); rounds that disagree widely are reported (:func:`disturbed`);
* batches compared leaf by leaf (:func:`compare_batches`).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codedag.experiments import pipelines
from codedag.measure import Comparison, Timing, compare, round_order
from codedag.measure.interference import spread_reason

IMAGE_PIPELINES = ("demo_image", "letterbox", "compose", "yolo_mosaic")


def pipeline_sizes(name: str, size: int | None) -> dict[str, int]:
    """Keyword sizes of pipeline ``name`` whose decoded source images are about ``size`` px.

    ``None`` keeps the pipeline's own defaults; audio pipelines have no image size.
    """
    if size is None or name not in IMAGE_PIPELINES:
        return {}
    if size < 32:
        raise ValueError(f"--size must be at least 32 px, got {size}")
    even = size - size % 2
    if name == "demo_image":
        return {"source_size": size, "image_size": max(16, size // 2)}
    if name == "yolo_mosaic":
        return {"img_size": even}
    # letterbox, compose: ragged sources around the size, resized to it (compose crops half)
    target = size if name == "letterbox" else max(16, size // 2)
    return {"img_size": target, "min_size": size * 3 // 4, "max_size": size * 5 // 4}


def make_loader(
    name: str,
    workers: int,
    batch_size: int,
    samples: int,
    seed: int,
    size: int | None = None,
    **defaults: int,
) -> Any:
    """Pipeline ``name``'s DataLoader: ``size`` (when given) overrides the ``defaults`` sizes."""
    sizes = {**defaults, **pipeline_sizes(name, size)}
    return pipelines.make_loader(
        name, batch_size=batch_size, num_workers=workers, seed=seed, n=samples, **sizes
    )


@dataclass
class LoaderTiming:
    """Steady-state times per batch of one variant, one per round.

    Attributes:
        name: the variant's name.
        round_s: each timed round's steady-state seconds per batch.
        batches: the batches of the warm-up round (CPU copies), for comparisons.
    """

    name: str
    round_s: list[float] = field(default_factory=list)
    batches: list[Any] = field(default_factory=list)

    @property
    def median_s(self) -> float:
        """Median over rounds of the steady-state time per batch."""
        return statistics.median(self.round_s) if self.round_s else float("nan")

    @property
    def spread_s(self) -> float:
        """Half the range of the rounds' figures (how far they disagree)."""
        return (max(self.round_s) - min(self.round_s)) / 2 if len(self.round_s) > 1 else 0.0

    @property
    def timing(self) -> Timing:
        """The rounds' figures summarized (at least one round)."""
        return Timing.of_seconds(self.round_s)

    def versus(self, reference: LoaderTiming, margin: float = 0.0) -> Comparison:
        """This variant judged against ``reference`` (B against A) by the rule of
        :mod:`codedag.measure`."""
        return compare(reference.timing, self.timing, margin)


def host_copy(batch: Any) -> Any:
    """A copy of ``batch`` on the host: tensors detached and copied to the CPU, arrays copied,
    tuples, lists and dicts copied leaf by leaf, anything else as it is."""
    import torch

    if isinstance(batch, torch.Tensor):
        return batch.detach().cpu().clone()
    if isinstance(batch, np.ndarray):
        return batch.copy()
    if isinstance(batch, tuple | list):
        return type(batch)(host_copy(b) for b in batch)
    if isinstance(batch, dict):
        return {k: host_copy(v) for k, v in batch.items()}
    return batch


def in_flight(loader: Any) -> int:
    """Batches a DataLoader's workers prepare ahead (0 without workers)."""
    workers = int(getattr(loader, "num_workers", 0) or 0)
    return workers * int(getattr(loader, "prefetch_factor", None) or 2) if workers else 0


def run_round(
    make_loader: Callable[[], Any], batches: int, keep: bool
) -> tuple[list[float], list[Any]]:
    """Iterate ``batches`` batches of a fresh loader; the intervals between batches after the
    first, and (with ``keep``) CPU copies of the batches."""
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
            kept.append(host_copy(batch))
        t0 = time.perf_counter()
    del iterator
    return times, kept


def steady_s(make_loader: Callable[[], Any], batches: int) -> float:
    """One round's steady-state seconds per batch (start-up and prefetched batches left out)."""
    loader = make_loader()
    skip = in_flight(loader)
    times, _ = run_round(lambda: loader, batches, keep=False)
    steady = times[skip:] if len(times) > skip + 1 else times[-2:] or times
    return statistics.fmean(steady) if steady else float("nan")


def compare_variants(
    variants: dict[str, tuple[Callable[[], Any], Callable[[], Any]]],
    batches: int,
    rounds: int,
) -> dict[str, LoaderTiming]:
    """Warm each variant up once, then time them in interleaved rounds.

    Args:
        variants: name -> ``(make_loader, context)``; ``context()`` is entered around each round
            (a migrator's ``with``), ``no_context`` for none.
        batches: batches per round; with workers, more than those they prefetch.
        rounds: timed rounds per variant.
    """
    out = {name: LoaderTiming(name) for name in variants}
    for name, (make_loader, context) in variants.items():
        with context():
            _, out[name].batches = run_round(make_loader, batches, keep=True)
    for r in range(rounds):
        for name in round_order(list(variants), r):
            make_loader, context = variants[name]
            with context():
                out[name].round_s.append(steady_s(make_loader, batches))
    return out


def disturbed(timings: dict[str, LoaderTiming]) -> list[str]:
    """Each variant whose rounds disagree widely, in words (empty: none)."""
    reasons = (spread_reason(f"{name}:", t.timing) for name, t in timings.items() if t.round_s)
    return [reason for reason in reasons if reason is not None]


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

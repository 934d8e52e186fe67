"""The prefix cache on an iterable data set: files streamed through ``__iter__``, side by side.

An ``IterableDataset`` streams the files of the ``audio_files`` pipeline (WAV at 32 kHz,
``librosa.load`` resampling to 16 kHz, ``np.pad``, a random crop from NumPy's global generator,
a log-mel spectrogram) or of ``yolo_files`` (``cv2.imread``, letterbox, random perspective, HSV),
written the way streaming loaders are: a loop over the files in ``__iter__``, each worker taking
its share. Each round runs the pipeline's own loader, then the whole plan (traced on the first
batch, planned with ``OptimizerManager(cache="auto")``, applied with an empty cache folder), for
``--epochs`` epochs, and prints samples/s of epoch 1 and epochs 2+ with their ratios (medians of
``--rounds`` interleaved rounds), the cache's hits, and whether every batch was the same.

It measures; it asserts nothing. Run::

    python benchmarks/iterable_cache.py [--stream audio yolo] [--workers 0 2] [--samples 128]
"""

from __future__ import annotations

import argparse
import functools
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, IterableDataset, get_worker_info


class _Share:
    """The indices of this worker's share of ``n`` files (all of them with 0 workers)."""

    @staticmethod
    def of(n: int) -> range:
        info = get_worker_info()
        return range(n) if info is None else range(info.id, n, info.num_workers)


class AudioStream(IterableDataset):  # type: ignore[type-arg]
    """audio_files' samples, streamed: load (resampled), pad, random crop, log-mel."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int]]:
        import librosa

        front = self.source
        for index in _Share.of(len(front.paths)):
            y, sr = librosa.load(front.paths[index], sr=front.sample_rate)
            y = np.pad(y, (0, max(0, front.length - len(y))))
            start = np.random.randint(0, len(y) - front.length + 1)
            db = front.log_mel(librosa, y[start : start + front.length], sr)
            yield torch.from_numpy(db[np.newaxis].astype(np.float32)), index % 4


class YoloStream(IterableDataset):  # type: ignore[type-arg]
    """yolo_files' samples, streamed (its own ``__getitem__``'s steps, one file at a time)."""

    def __init__(self, source: Any) -> None:
        self.source = source

    def __iter__(self) -> Iterator[Any]:
        for index in _Share.of(len(self.source)):
            yield self.source[index]


STREAMS: dict[str, tuple[str, Callable[[Any], IterableDataset]]] = {  # type: ignore[type-arg]
    "audio": ("audio_files", AudioStream),
    "yolo": ("yolo_files", YoloStream),
}


def _make(stream: Any, source: Any, workers: int, batch: int, collate: Any) -> DataLoader:  # type: ignore[type-arg]
    """A DataLoader streaming ``source`` through ``stream``."""
    return DataLoader(stream(source), batch_size=batch, num_workers=workers, collate_fn=collate)


def _epochs(make: Callable[[], Any], epochs: int) -> tuple[list[float], list[list[Any]]]:
    rates, batches = [], []
    loader = make()
    for epoch in range(epochs):
        random.seed(epoch)
        np.random.seed(epoch)
        torch.manual_seed(epoch)
        count, kept, started = 0, [], time.perf_counter()
        for batch in loader:
            first = batch[0] if isinstance(batch, list | tuple) else batch
            count += len(first)
            kept.append(batch)
        rates.append(count / (time.perf_counter() - started))
        batches.append(kept)
    return rates, batches


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, list | tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return bool(a == b)


def _plan(make: Callable[[], Any]) -> dict[str, Any]:
    from codedag.optimize.manager import OptimizerManager
    from codedag.trace.dataloader import trace_first_batch
    from codedag.trace.tracer import EnhancedTracer

    tracer = EnhancedTracer()
    trace_first_batch(make(), tracer)
    return OptimizerManager(k=2, cache="auto").optimize(tracer.dag)["migration_plan"]


def _planned(plan: dict[str, Any], make: Callable[[], Any], epochs: int) -> tuple[Any, ...]:
    from codedag.migrate.api import PipelineMigrator
    from codedag.migrate.cache.runtime import CacheSettings
    from codedag.store.tiers import StoreSettings

    folder = Path(tempfile.mkdtemp(prefix="codedag-iterable-"))
    try:
        settings = CacheSettings(store=StoreSettings(folder=folder / "cache"))
        migrator = PipelineMigrator(plan, guard=False, cache=settings)
        with migrator:
            rates, batches = _epochs(make, epochs)
        hits = migrator.get_stats()["cache"]["hits"]
        migrator.cache.store.clear()
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return rates, batches, hits


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--stream", nargs="+", default=list(STREAMS), choices=STREAMS)
    parser.add_argument("--workers", nargs="+", type=int, default=[0, 2])
    parser.add_argument("--samples", type=int, default=128)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    from codedag.experiments import pipelines

    torch.set_num_threads(1)
    print(
        f"{args.samples} samples streamed by an IterableDataset, batches of {args.batch_size}, "
        f"{args.epochs} epochs, {args.rounds} interleaved rounds; samples/s (medians) and "
        "plan / own ratios",
        flush=True,
    )
    print(f"{'stream':8} w {'own e1':>8} {'own e2+':>8} {'plan e1':>8} {'plan e2+':>9} "
          f"{'e1 x':>6} {'e2+ x':>6}  hits  chain  same")  # fmt: skip
    for name in args.stream:
        pipeline, stream = STREAMS[name]
        module = pipelines.pipeline(pipeline)
        source = module.make_dataset(n=args.samples)
        collate = getattr(module, "collate_fn", None)
        for workers in args.workers:
            make = functools.partial(_make, stream, source, workers, args.batch_size, collate)

            plan = _plan(make)
            chains = [c["id"] for c in (plan.get("cache") or {}).get("chains", []) if c["cached"]]
            own: list[list[float]] = []
            ran: list[list[float]] = []
            same, hits = True, 0
            for _ in range(args.rounds):
                rates, reference = _epochs(make, args.epochs)
                own.append(rates)
                rates, batches, hits = _planned(plan, make, args.epochs)
                ran.append(rates)
                same = same and _same(reference, batches)

            def first(runs: list[list[float]]) -> float:
                return statistics.median(r[0] for r in runs)

            def later(runs: list[list[float]]) -> float:
                return statistics.median(statistics.mean(r[1:]) for r in runs)

            print(
                f"{name:8} {workers} {first(own):8.1f} {later(own):8.1f} {first(ran):8.1f} "
                f"{later(ran):9.1f} {first(ran) / first(own):5.2f}x {later(ran) / later(own):5.2f}x "
                f"{hits:5d}  {','.join(chains) or 'none':5}  {'yes' if same else 'NO'}",
                flush=True,
            )


if __name__ == "__main__":
    sys.exit(main())

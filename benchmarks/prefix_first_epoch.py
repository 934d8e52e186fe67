"""What the prefix cache costs a first epoch: the loading thread's share and the writer's.

For each example pipeline, one data set is built, traced and planned as ``whole_plan.py`` does,
and its first epoch is loaded with 0 workers (the loading thread is this process's main thread)
in two variants, interleaved in ``--rounds`` rounds (own plan, plan own, ...):

* ``own``: the pipeline's own DataLoader;
* ``plan``: the whole plan applied, the prefix cache on a fresh store, so every sample is a miss
  that computes its chain with the cache's bookkeeping (keys, headers, the checksum at the cut)
  and queues its value for the writer thread.

Printed per pipeline, medians over rounds: milliseconds per sample of wall time (the epoch, to
its last batch) and of the loading thread's CPU time (``time.thread_time``) for both variants,
their ratio, what the cache adds to the loading thread's CPU per sample, and what it adds to the
other threads' CPU per sample: the writer thread's (until every value is stored; the libraries'
own threads count in both variants); and the source lookups skipped per sample (1.00: every
sample computed its chain without asking the store, which held none of its values).
On a machine with a free core the writer's time overlaps the loading; where no core is free, it
adds to the epoch. It measures; it asserts nothing. Run::

    python benchmarks/prefix_first_epoch.py [--pipelines letterbox demo_image] [--rounds 5]
    python benchmarks/prefix_first_epoch.py --pipelines letterbox --samples 256 \
        --option img_size=32 --option min_size=24 --option max_size=40
    python benchmarks/prefix_first_epoch.py --pipelines demo_image --no-judge \
        --option image_size=16 --option source_size=24

``--no-judge`` keeps every chain cached whatever it costs (with small images storing does not
pay, and the cache would give the chain up partway through the epoch).
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from whole_plan import Case, prepare

from codedag.measure import round_order


@dataclass
class Epoch:
    """One first epoch: milliseconds per sample."""

    wall_ms: float
    loading_cpu_ms: float
    other_cpu_ms: float  # the process's other threads: the writer's, and the libraries' own
    skipped: float = 0.0  # source lookups skipped per sample (the store held none of the chain)


def _epoch(case: Case, plan: bool, judge: bool = True) -> Epoch:
    from codedag.migrate.api import PipelineMigrator
    from codedag.migrate.cache.runtime import CacheSettings
    from codedag.store.tiers import StoreSettings

    folder = Path(tempfile.mkdtemp(prefix="codedag-first-epoch-"))
    migrator = None
    try:
        if plan:
            store = StoreSettings(folder=folder / "cache", ram_budget_bytes=case.budget_bytes)
            settings = (
                CacheSettings(store=store) if judge else CacheSettings(store=store, judge_after=0)
            )
            migrator = PipelineMigrator(case.plan, guard=False, cache=settings)
            migrator.__enter__()
        random.seed(0)
        np.random.seed(0)
        torch.manual_seed(0)
        loader = case.make(0)
        count = 0
        process, thread = time.process_time(), time.thread_time()
        started = time.perf_counter()
        for batch in loader:
            count += len(batch[0] if isinstance(batch, list | tuple) else batch)
        wall_ms = (time.perf_counter() - started) * 1e3 / count
        loading_ms = (time.thread_time() - thread) * 1e3 / count
        if migrator is not None:
            migrator.cache.session.writer.flush()
        other_ms = (time.process_time() - process) * 1e3 / count - loading_ms
        skipped = 0.0
        if migrator is not None:
            skipped = migrator.cache.session.cold_skips / count
            migrator.__exit__(None, None, None)
            migrator.cache.store.clear()
            migrator = None
        return Epoch(wall_ms, loading_ms, other_ms, skipped)
    finally:
        if migrator is not None:
            migrator.__exit__(None, None, None)
        shutil.rmtree(folder, ignore_errors=True)


def _median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--pipelines", nargs="+", default=["demo_image", "letterbox", "yolo_mosaic", "pil_recipe"]
    )
    parser.add_argument("--samples", type=int, default=96)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--torch-threads", type=int, default=1, help="0: torch's own")
    parser.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=INT",
        help="an option of the pipelines' factories (e.g. max_size=40: small images, so that "
        "the libraries' work is small beside the cache's)",
    )
    parser.add_argument(
        "--no-judge",
        action="store_true",
        help="never give a chain up for its cost (small images: the cache's own work measured)",
    )
    args = parser.parse_args()
    options = {k: int(v) for k, v in (o.split("=", 1) for o in args.option)}
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    print(
        f"{args.samples} samples, batches of {args.batch_size}, 0 workers, first epochs from a "
        f"fresh store, {args.rounds} interleaved rounds, {os.cpu_count()} CPUs; ms per sample, "
        "medians; x: own / plan (above 1: the plan is faster)"
    )
    print(
        f"{'pipeline':<11}  {'own wall':>8} {'plan wall':>9} {'x':>5}  {'own cpu':>7} "
        f"{'plan cpu':>8} {'x':>5}  {'cache on loading thread':>23}  {'writer cpu':>10}  "
        f"{'lookups skipped':>15}"
    )
    for name in args.pipelines:
        case = prepare(name, 0, args.samples, args.batch_size, False, None, options)
        runs: dict[str, list[Epoch]] = {"own": [], "plan": []}
        for r in range(args.rounds):
            for variant in round_order(["own", "plan"], r):
                runs[variant].append(_epoch(case, variant == "plan", not args.no_judge))
        own, plan = runs["own"], runs["plan"]
        wall_x = _median([o.wall_ms / p.wall_ms for o, p in zip(own, plan)])
        cpu_x = _median([o.loading_cpu_ms / p.loading_cpu_ms for o, p in zip(own, plan)])
        added = _median([p.loading_cpu_ms - o.loading_cpu_ms for o, p in zip(own, plan)])
        writer = _median([p.other_cpu_ms - o.other_cpu_ms for o, p in zip(own, plan)])
        print(
            f"{name:<11}  {_median([o.wall_ms for o in own]):8.2f} "
            f"{_median([p.wall_ms for p in plan]):9.2f} {wall_x:5.2f}  "
            f"{_median([o.loading_cpu_ms for o in own]):7.2f} "
            f"{_median([p.loading_cpu_ms for p in plan]):8.2f} {cpu_x:5.2f}  "
            f"{added:23.3f}  {writer:10.2f}  {_median([p.skipped for p in plan]):15.2f}",
            flush=True,
        )


if __name__ == "__main__":
    main()

"""Measured placement on realistic pipelines: baseline vs optimized batch time, side by side.

For each pipeline of ``codedag.experiments.pipelines`` and each worker count, in one run:

1. trace one batch of the pipeline's DataLoader;
2. optimize the DAG for the target device (CUDA when present, else torch on the CPU), which
   measures every candidate call on it (calibration, cached) and places only what wins;
3. time batches of the loader without and with the plan applied (``common.compare_variants``, on
   ``codedag.measure``): one untimed warm-up round each, then interleaved rounds (A B, B A, ...),
   each round's steady-state time per batch (worker start-up and prefetched batches left out),
   the median over rounds; rounds that disagree widely are noted on stderr;
4. compare the optimized batches with the baseline's (same seed, same sample order): identical,
   or the largest difference; the non-image leaves (labels, boxes: products of the random draws)
   are compared bit for bit.

Printed: placed functions, ms per batch (median) both ways, the ratio optimized / baseline, and
the comparison. Nothing is asserted: it measures. Runs unchanged on CUDA.

Usage::

    python benchmarks/placement.py [--pipelines letterbox mel ...] [--workers 0 2]
        [--batches 16] [--batch-size 16] [--rounds 3] [--size PX] [--device cpu|cuda:0]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from typing import Any

import torch
from common import compare_batches, compare_variants, disturbed, make_loader, no_context

from codedag.migrate.api import PipelineMigrator
from codedag.optimize.manager import OptimizerManager
from codedag.trace import trace_dataloader

DEFAULT_PIPELINES = ("demo_image", "demo_audio", "letterbox", "compose", "yolo_mosaic", "mel")
AUDIO = ("demo_audio", "mel")


def bench_one(name: str, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    """Trace, plan and time one pipeline with one worker count."""
    samples = args.batch_size * args.batches
    make = functools.partial(
        make_loader, name, workers, args.batch_size, samples, args.seed, args.size
    )
    tracer, _ = trace_dataloader(make())
    manager = OptimizerManager(k=2, target_device=args.device)
    plan = manager.optimize(tracer.dag)["migration_plan"]
    placed = sorted({c["function"] for c in plan["calls"] if c["migrate"]})
    migrator = PipelineMigrator.from_plan(plan, default_device=args.device)
    timings = compare_variants(
        {"baseline": (make, no_context), "optimized": (make, lambda: migrator)},
        batches=args.batches,
        rounds=args.rounds,
    )
    base, opt = timings["baseline"], timings["optimized"]
    for line in disturbed(timings):
        print(f"note, {name} with {workers} workers: {line}", file=sys.stderr)
    comparison = compare_batches(base.batches, opt.batches)
    labels_differ = [p for p in comparison.differing if not p.startswith("[0]")]
    stats = migrator.get_stats()
    return {
        "pipeline": name,
        "workers": workers,
        "placed": placed,
        "calibrated": sum(1 for c in plan["calls"] if c.get("original_ns") is not None),
        "baseline_ms": base.median_s * 1e3,
        "optimized_ms": opt.median_s * 1e3,
        "ratio": opt.median_s / base.median_s,
        "identical": comparison.identical,
        "max_abs_diff": comparison.max_abs_diff,
        "draws_identical": not labels_differ,
        "migrated_calls": stats["totals"]["migrated"],
        "fell_back": stats["totals"]["fell_back"],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipelines", nargs="+", default=list(DEFAULT_PIPELINES))
    parser.add_argument("--workers", nargs="+", type=int, default=[0, 2])
    parser.add_argument("--batches", type=int, default=16, help="batches per round (16)")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=3, help="rounds per variant (3)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--size", type=int, default=None, help="source image side in px (default: each pipeline's)"
    )
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args(argv)

    rows = []
    header = (
        f"{'pipeline':<12} {'workers':>7} {'baseline ms':>12} {'optimized ms':>13} "
        f"{'ratio':>6} {'outputs':>22} {'draws':>6}  placed"
    )
    print(f"target device {args.device}; ratio = optimized / baseline median batch time")
    print(header)
    for name in args.pipelines:
        for workers in args.workers:
            row = bench_one(name, workers, args)
            rows.append(row)
            outputs = "identical" if row["identical"] else f"max |diff| {row['max_abs_diff']:.3g}"
            print(
                f"{name:<12} {workers:>7} {row['baseline_ms']:>12.1f} {row['optimized_ms']:>13.1f} "
                f"{row['ratio']:>6.3f} {outputs:>22} {'same' if row['draws_identical'] else 'DIFF':>6}"
                f"  {', '.join(row['placed']) or '-'}",
                flush=True,
            )
    audio = [r["ratio"] for r in rows if r["pipeline"] in AUDIO]
    image = [r["ratio"] for r in rows if r["pipeline"] not in AUDIO]
    if image:
        print(f"image pipelines: worst ratio {max(image):.3f} (goal <= 1.03)")
    if audio:
        print(f"audio pipelines: worst ratio {max(audio):.3f} (goal <= 0.77)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"device": args.device, "rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

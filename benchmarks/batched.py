"""Batched execution vs per-call migration vs the original pipeline, side by side.

For the demo image pipeline and the benchmark pipelines of ``benchmarks/placement.py``
(``codedag.experiments.pipelines``), in one run, per pipeline:

1. trace one batch of its DataLoader;
2. plan three variants on the device: ``original`` (nothing applied); ``per-call`` (every call
   with a backend migrated one by one: a what-if plan, ``--assume-speedup``, so that the
   per-call path runs whatever it measures); ``batched`` (``--batched always``: each sample chain
   found in the trace runs once per batch in the main process, per-call placement off);
3. time batches of the loader under each variant (``common.compare_variants``: one
   untimed warm-up round each, then interleaved rounds, steady-state time per batch, median;
   rounds that disagree widely are noted on stderr);
4. count per batch: backend calls (per-call: migrated calls; batched: batched backend calls) and
   host<->device bytes of batched execution (on the CPU counted by a separate short run that copies
   as a device would: the timed runs do not copy);
5. compare the batched variant's batches with the original's (same seed and order).

Printed: samples/s of each variant, the ratios to the original, backend calls and bytes per
batch, the plan's own batched decision for the device (``auto``: measured) and whether the
outputs are equal. Nothing is asserted: it measures. The device comes from ``--device`` (default:
CUDA when available, else the CPU), so it runs unchanged on a GPU machine.

Usage::

    python benchmarks/batched.py [--pipelines demo_image letterbox ...] [--workers 0]
        [--batches 4] [--batch-size 8] [--rounds 2] [--size PX] [--device cpu|cuda:0]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
import time
from typing import Any

import torch
from common import compare_batches, compare_variants, disturbed, make_loader, no_context

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.batched.settings import BatchedSettings
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.placement import PlacementSettings
from codedag.trace import trace_dataloader

DEFAULT_PIPELINES = ("demo_image", "letterbox", "compose", "yolo_mosaic", "demo_audio", "mel")
SMALL = {
    "demo_image": {"image_size": 128, "source_size": 256},
    "letterbox": {"img_size": 320, "min_size": 256, "max_size": 480},
    "compose": {"img_size": 224, "min_size": 256, "max_size": 400},
    "yolo_mosaic": {},
    "demo_audio": {},
    "mel": {},
}


def _loader(
    name: str, workers: int, batch_size: int, samples: int, seed: int, size: int | None
) -> Any:
    return make_loader(name, workers, batch_size, samples, seed, size, **SMALL[name])


def _plans(dag: Any, device: str) -> dict[str, dict[str, Any]]:
    per_call = OptimizerManager(
        k=1,
        target_device=device,
        placement=PlacementSettings(assume_speedup=1e6, batched="never"),
    ).optimize(dag)["migration_plan"]
    batched = OptimizerManager(k=1, target_device=device, batched="always", calibrate=False)
    forced = batched.optimize(dag)["migration_plan"]
    forced["context_device_map"] = {}  # batched chains only
    for call in forced["calls"]:
        call["migrate"] = False
    auto = OptimizerManager(k=1, target_device=device).optimize(dag)["migration_plan"]
    return {"per-call": per_call, "batched": forced, "auto": auto}


def _per_batch(value: float, batches: int) -> float:
    return value / batches if batches else float("nan")


def bench_one(name: str, workers: int, args: argparse.Namespace) -> dict[str, Any]:
    """Trace, plan and time one pipeline with one worker count."""
    samples = args.batch_size * args.batches
    make = functools.partial(_loader, name, workers, args.batch_size, samples, args.seed, args.size)
    clock = time.perf_counter()
    tracer, _ = trace_dataloader(make())
    phase_s = {"trace": time.perf_counter() - clock}
    clock = time.perf_counter()
    plans = _plans(tracer.dag, args.device)
    phase_s["plan"] = time.perf_counter() - clock
    clock = time.perf_counter()
    per_call = PipelineMigrator.from_plan(
        plans["per-call"], default_device=args.device, guard=False
    )
    batched = PipelineMigrator.from_plan(plans["batched"], default_device=args.device, guard=False)
    timings = compare_variants(
        {
            "original": (make, no_context),
            "per-call": (make, lambda: per_call),
            "batched": (make, lambda: batched),
        },
        batches=args.batches,
        rounds=args.rounds,
    )
    phase_s["time"] = time.perf_counter() - clock
    for line in disturbed(timings):
        print(f"note, {name} with {workers} workers: {line}", file=sys.stderr)
    stats = batched.get_stats()["batched"]
    per_call_batches = (args.rounds + 1) * args.batches
    calls_per_batch = per_call.get_stats()["totals"]["migrated"] / per_call_batches
    counted = _count_bytes(plans["batched"], make, args.device)
    comparison = compare_batches(timings["original"].batches, timings["batched"].batches)
    chains = plans["auto"]["batched"]["chains"]
    rate = {k: args.batch_size / t.median_s for k, t in timings.items()}
    return {
        "pipeline": name,
        "workers": workers,
        "samples_s": rate,
        "per_call_ratio": rate["per-call"] / rate["original"],
        "batched_ratio": rate["batched"] / rate["original"],
        "per_call_backend_calls": calls_per_batch,
        "batched_backend_calls": _per_batch(stats.get("backend_calls", 0), stats.get("batches", 0)),
        "batched_forced": stats.get("forced", {}),
        "h2d_bytes": counted["h2d"],
        "d2h_bytes": counted["d2h"],
        "chains": [c["id"] for c in chains],
        "auto": [f"{c['id']}: {'batched' if c['batched'] else 'per sample'}" for c in chains],
        "auto_reasons": [c["reason"] for c in chains],
        "identical": comparison.identical,
        "max_abs_diff": comparison.max_abs_diff,
        "phase_s": phase_s,
    }


def _count_bytes(plan: dict[str, Any], make: Any, device: str) -> dict[str, float]:
    """Host<->device bytes per batch of batched execution (copies simulated on the CPU)."""
    settings = BatchedSettings(simulate_transfers=device.startswith("cpu"))
    migrator = PipelineMigrator.from_plan(
        plan, default_device=device, guard=False, batched=settings
    )
    with migrator:
        for i, _batch in enumerate(make()):
            if i == 1:
                break
    stats = migrator.get_stats()["batched"]
    batches = stats.get("batches", 0) if stats.get("enabled") else 0
    return {
        "h2d": _per_batch(stats.get("h2d_bytes", 0), batches),
        "d2h": _per_batch(stats.get("d2h_bytes", 0), batches),
    }


def _mb(value: float) -> str:
    return "-" if value != value else f"{value / 1e6:.2f}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipelines", nargs="+", default=list(DEFAULT_PIPELINES))
    parser.add_argument("--workers", nargs="+", type=int, default=[0])
    parser.add_argument("--batches", type=int, default=4, help="batches per round (4)")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2, help="rounds per variant (2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--size", type=int, default=None, help="source image side in px (default: small sizes)"
    )
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args(argv)

    print(
        f"device {args.device}; samples/s per variant; ratio = variant / original samples/s; "
        f"calls = backend calls per batch; bytes per batch of batched execution"
    )
    print(
        f"{'pipeline':<12} {'w':>2} {'original':>9} {'per-call':>9} {'batched':>9} "
        f"{'pc ratio':>8} {'b ratio':>8} {'pc calls':>8} {'b calls':>8} {'h2d MB':>7} "
        f"{'d2h MB':>7} {'outputs':>18}  auto decision"
    )
    rows = []
    for name in args.pipelines:
        for workers in args.workers:
            row = bench_one(name, workers, args)
            rows.append(row)
            s = row["samples_s"]
            outputs = "identical" if row["identical"] else f"max|d| {row['max_abs_diff']:.3g}"
            print(
                f"{name:<12} {workers:>2} {s['original']:>9.1f} {s['per-call']:>9.1f} "
                f"{s['batched']:>9.1f} {row['per_call_ratio']:>8.3f} {row['batched_ratio']:>8.3f} "
                f"{row['per_call_backend_calls']:>8.1f} {row['batched_backend_calls']:>8.1f} "
                f"{_mb(row['h2d_bytes']):>7} {_mb(row['d2h_bytes']):>7} {outputs:>18}  "
                f"{'; '.join(row['auto']) or 'no chain'}",
                flush=True,
            )
            phases = ", ".join(f"{k} {v:.1f} s" for k, v in row["phase_s"].items())
            print(f"{'':<15}{phases}")
            if row["batched_forced"]:
                print(f"{'':<15}batched values forced: {row['batched_forced']}")
    print("auto decisions (measured on the device):")
    for row in rows:
        for reason in row["auto_reasons"]:
            print(f"  {row['pipeline']}: {reason}")
    if not torch.cuda.is_available():
        print("no CUDA here: GPU figures need a GPU machine (the script runs there unchanged)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"device": args.device, "rows": rows}, handle, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())

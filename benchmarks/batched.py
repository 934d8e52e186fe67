"""Batched execution vs per-call migration vs the original pipeline vs hand-written torch.

For the demo image pipeline and the benchmark pipelines of ``benchmarks/placement.py``
(``codedag.experiments.pipelines``), in one run, per pipeline and image size:

1. trace one batch of its DataLoader;
2. plan three variants on the device: ``original`` (nothing applied); ``per-call`` (every call
   with a backend migrated one by one: a what-if plan, ``--assume-speedup``, so that the
   per-call path runs whatever it measures); ``batched`` (``--batched always``: each sample chain
   found in the trace runs once per batch in the main process, per-call placement off); and,
   where :mod:`handwritten` has one, ``hand-written``: the same chain written by hand in batched
   torch (the floor a torch engineer would write), run in the loader's collate function;
3. time batches of the loader under each variant (``common.compare_variants``: one
   untimed warm-up round each, then interleaved rounds, steady-state time per batch, median;
   rounds that disagree widely are noted on stderr);
4. count per batch: backend calls (per-call: migrated calls; batched: batched backend calls) and
   host<->device bytes of batched execution (on the CPU counted by a separate short run that copies
   as a device would: the timed runs do not copy);
5. compare the batched variant's batches with the original's (same seed and order);
6. time one batch of the chain alone (:mod:`chain_floor`): cv2 per sample, codedag's batched
   executor and the hand-written torch chain on the same samples, their ratio (the goal: batched
   at most 1.3x hand-written), how far the hand-written and the batched outputs are from cv2's
   (largest difference, share of elements beyond the tolerance table's), and what recording
   costs per sample and per operation.

Printed: samples/s of each variant, the ratios, backend calls and bytes per batch, the plan's own
batched decision for the device (``auto``: measured) and whether the outputs are equal; then the
chain table. Nothing is asserted: it measures. The device comes from ``--device`` (default:
CUDA when available, else the CPU), so it runs unchanged on a GPU machine.

Usage::

    python benchmarks/batched.py [--pipelines demo_image letterbox ...] [--workers 0]
        [--batches 4] [--batch-size 8] [--rounds 2] [--sizes PX ...] [--threads N]
        [--device cpu|cuda:0] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import sys
import time
from typing import Any

import chain_floor
import torch
from common import (
    IMAGE_PIPELINES,
    compare_batches,
    compare_variants,
    disturbed,
    make_loader,
    no_context,
)
from handwritten import FLOORS, floor_loader

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


def bench_one(
    name: str, workers: int, size: int | None, args: argparse.Namespace
) -> dict[str, Any]:
    """Trace, plan and time one pipeline with one worker count at one image size."""
    samples = args.batch_size * args.batches
    make = functools.partial(_loader, name, workers, args.batch_size, samples, args.seed, size)
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
    variants = {
        "original": (make, no_context),
        "per-call": (make, lambda: per_call),
        "batched": (make, lambda: batched),
    }
    if name in FLOORS:
        device = torch.device(args.device)
        variants["hand-written"] = (lambda: floor_loader(name, make(), device), no_context)
    timings = compare_variants(variants, batches=args.batches, rounds=args.rounds)
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
    clock = time.perf_counter()
    chain = chain_floor.measure(name, make(), plans["batched"], args.device) if chains else None
    phase_s["chain"] = time.perf_counter() - clock
    return {
        "pipeline": name,
        "size": size,
        "workers": workers,
        "samples_s": rate,
        "per_call_ratio": rate["per-call"] / rate["original"],
        "batched_ratio": rate["batched"] / rate["original"],
        "floor_ratio": rate["hand-written"] / rate["batched"] if "hand-written" in rate else None,
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
        "chain": None if chain is None else {**dataclasses.asdict(chain), "ratio": chain.ratio},
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


def _cell(value: float | None, spec: str, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:>{width}{spec}}"


def _exactness(found: dict[str, float] | None) -> str:
    if found is None:
        return f"{'-':>17}"
    return f"{found['max_abs_diff']:>9.3g} {found['beyond_frac']:>7.2%}"


def _print_chains(rows: list[dict[str, Any]]) -> None:
    print(
        "chain alone, one batch in the main process (ms per batch); b/hw = batched over "
        "hand-written; hw |d| and b |d|: hand-written and batched outputs against cv2's, largest "
        "difference and share of elements beyond the tolerance of the chain's loosest op; "
        "recording: us per sample and per operation (direct), in __getitem__ (decode cached), "
        "collate us per sample; aten/op and syncs: aten ops per chain op and data-dependent "
        "host syncs of one batch run as on a device (whole, no host reads)"
    )
    print(
        f"{'pipeline':<12} {'px':>5} {'cv2':>8} {'batched':>8} {'hand':>8} {'b/hw':>6} "
        f"{'hw |d|':>9} {'hw >tol':>7} {'b |d|':>9} {'b >tol':>7} "
        f"{'rec/smp':>8} {'rec/op':>7} {'getitem':>8} {'collate':>8} {'ops':>5} "
        f"{'calls':>6} {'groups':>6} {'aten/op':>7} {'syncs':>5}"
    )
    for row in rows:
        c = row["chain"]
        if c is None:
            print(f"{row['pipeline']:<12} {row['size'] or '-':>5}  no chain deferred")
            continue
        print(
            f"{row['pipeline']:<12} {row['size'] or '-':>5} {c['cv2_ms']:>8.1f} "
            f"{c['batched_ms']:>8.1f} {_cell(c['floor_ms'], '.1f', 8)} {_cell(c['ratio'], '.2f', 6)} "
            f"{_exactness(c['floor_exactness'])} {_exactness(c['batched_exactness'])} "
            f"{c['record_us_per_sample']:>8.1f} {c['record_us_per_op']:>7.2f} "
            f"{c['getitem_record_us']:>8.1f} {c['collate_us_per_sample']:>8.1f} "
            f"{c['ops_per_sample']:>5.1f} {c['backend_calls']:>6} {c['groups']:>6} "
            f"{c['aten_ops_per_op']:>7.1f} {c['syncs_per_batch']:>5}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipelines", nargs="+", default=list(DEFAULT_PIPELINES))
    parser.add_argument("--workers", nargs="+", type=int, default=[0])
    parser.add_argument(
        "--batches", type=int, default=4, help="batches per round (4; at least 2: one interval)"
    )
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2, help="rounds per variant (2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--sizes",
        "--size",
        nargs="+",
        type=int,
        default=[None],
        help="source image sides in px, each measured (default: the pipelines' small sizes)",
    )
    parser.add_argument(
        "--threads", type=int, default=None, help="torch threads (default: torch's)"
    )
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args(argv)
    if args.batches < 2 or args.rounds < 1 or args.batch_size < 1:
        # a round times the intervals between its batches: one batch gives none
        parser.error("--batches needs at least 2, --rounds and --batch-size at least 1")
    if args.threads:
        torch.set_num_threads(args.threads)

    print(
        f"device {args.device}, {torch.get_num_threads()} torch threads; samples/s per variant; "
        f"b/orig = batched over original samples/s; hw/b = hand-written over batched; "
        f"calls = backend calls per batch; bytes per batch of batched execution"
    )
    print(
        f"{'pipeline':<12} {'px':>5} {'w':>2} {'original':>9} {'per-call':>9} {'batched':>9} "
        f"{'hand':>9} {'pc ratio':>8} {'b/orig':>7} {'hw/b':>6} {'pc calls':>8} {'b calls':>8} "
        f"{'h2d MB':>7} {'d2h MB':>7} {'outputs':>18}  auto decision"
    )
    rows = []
    for name in args.pipelines:
        sizes = args.sizes if name in IMAGE_PIPELINES else [None]
        for size in sizes:
            for workers in args.workers:
                row = bench_one(name, workers, size, args)
                rows.append(row)
                s = row["samples_s"]
                outputs = "identical" if row["identical"] else f"max|d| {row['max_abs_diff']:.3g}"
                print(
                    f"{name:<12} {size or '-':>5} {workers:>2} {s['original']:>9.1f} "
                    f"{s['per-call']:>9.1f} {s['batched']:>9.1f} "
                    f"{_cell(s.get('hand-written'), '.1f', 9)} {row['per_call_ratio']:>8.3f} "
                    f"{row['batched_ratio']:>7.3f} {_cell(row['floor_ratio'], '.3f', 6)} "
                    f"{row['per_call_backend_calls']:>8.1f} {row['batched_backend_calls']:>8.1f} "
                    f"{_mb(row['h2d_bytes']):>7} {_mb(row['d2h_bytes']):>7} {outputs:>18}  "
                    f"{'; '.join(row['auto']) or 'no chain'}",
                    flush=True,
                )
                phases = ", ".join(f"{k} {v:.1f} s" for k, v in row["phase_s"].items())
                print(f"{'':<15}{phases}")
                if row["batched_forced"]:
                    print(f"{'':<15}batched values forced: {row['batched_forced']}")
    _print_chains(rows)
    print("auto decisions (measured on the device):")
    for row in rows:
        for reason in row["auto_reasons"]:
            print(f"  {row['pipeline']} {row['size'] or ''}: {reason}")
    if not torch.cuda.is_available():
        print("no CUDA here: GPU figures need a GPU machine (the script runs there unchanged)")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"device": args.device, "rows": rows}, handle, indent=2, default=str)
    return 0


if __name__ == "__main__":
    sys.exit(main())

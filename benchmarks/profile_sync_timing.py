"""Does a step timer show what `.item()` costs? Per-step synchronize vs CUDA events, side by side.

The original profiler demo timed each step as ``synchronize(); t0; step(); synchronize(); t1``.
That drains the GPU queue around every step, so a step that never synchronizes loses its overlap
with the next step's host work, and the ``sync`` scenario's forced reads look free. codedag times
steps with CUDA events and no synchronization in between. This script runs the ``sync`` scenario
and the same step without reads (the ``dataloader`` step with no data pressure), both methods in
one process on the same batches, and prints the sync/baseline ratio each method reports.

    python benchmarks/profile_sync_timing.py --device cuda [--batch-size 64 --image-size 224]

On the CPU both methods agree (nothing is asynchronous); the difference needs a CUDA device.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable
from typing import Any

import torch

from codedag.profile.config import ProfileConfig
from codedag.profile.scenarios import build_scenario


def _synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def per_step_synchronized(step: Callable[[Any], None], batches: list, device: str) -> float:
    """The original demo's timer: mean of synchronize-bracketed step times (s)."""
    times = []
    for batch in batches:
        _synchronize(device)
        t0 = time.perf_counter()
        step(batch)
        _synchronize(device)
        times.append(time.perf_counter() - t0)
    return statistics.fmean(times)


def events_throughput(step: Callable[[Any], None], batches: list, device: str) -> float:
    """codedag's timer: events around steps, no sync in between; window time per step (s)."""
    _synchronize(device)
    if device != "cuda":
        t0 = time.perf_counter()
        for batch in batches:
            step(batch)
        return (time.perf_counter() - t0) / len(batches)
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    for batch in batches:
        step(batch)
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / 1000.0 / len(batches)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--image-size", type=int, default=224)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("profile_sync_timing: error: no CUDA device; use --device cpu")
    common = dict(
        device=args.device,
        batch_size=args.batch_size,
        image_size_px=args.image_size,
        dataset_size=args.batch_size * args.steps,
        num_workers=0,
        pin_memory=args.device == "cuda",
        cpu_work=0,
        io_sleep_ms=0.0,
        output_json="",
    )
    programs = {
        "baseline": build_scenario(ProfileConfig(scenario="dataloader", **common)),
        "sync": build_scenario(ProfileConfig(scenario="sync", **common)),
    }
    batches = list(programs["baseline"].batches)  # the same batches, loaded once, for both
    results: dict[str, dict[str, list[float]]] = {
        name: {"synchronized": [], "events": []} for name in programs
    }
    for program in programs.values():  # warm-up: cuDNN choices, allocator, fused optimizer
        for batch in batches[:5]:
            program.step(batch)
    for _ in range(args.repeats):  # interleaved, so drift hits both alike
        for name, program in programs.items():
            results[name]["synchronized"].append(
                per_step_synchronized(program.step, batches, args.device)
            )
            results[name]["events"].append(events_throughput(program.step, batches, args.device))
    print(
        f"device={args.device} batch={args.batch_size} image={args.image_size} steps={args.steps}"
    )
    print(f"{'method':<28}{'baseline ms':>12}{'sync ms':>10}{'sync/baseline':>15}")
    for method, label in (
        ("synchronized", "synchronize around each step"),
        ("events", "no per-step sync (events)"),
    ):
        base = statistics.median(results["baseline"][method])
        sync = statistics.median(results["sync"][method])
        print(f"{label:<28}{base * 1e3:>12.2f}{sync * 1e3:>10.2f}{sync / base:>15.2f}")


if __name__ == "__main__":
    main()

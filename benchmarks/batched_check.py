"""The batched chains' run-time check end to end: what it decides in the loader, and what it gives.

For each pipeline: trace one batch of its DataLoader and plan on the device, batched chains
decided by calibration (``auto``). With ``--chosen``, every chain found runs batched as if the
plan had chosen it (``mode: auto``, so the check applies: on a CPU, where ``auto`` keeps image
chains per sample, this shows the check stopping them). Then one epoch of ``--batches`` batches
with the plan applied, in which the check decides (it needs up to 8 blocks of at least 4
batches: more with workers), and ``--rounds`` interleaved epochs of the original loader and of
the plan after the check. One untimed epoch of the original comes first: on a freshly started
virtual machine, memory a process touches first costs several times more, and would fall on
whichever variant ran first. Printed per pipeline: the check's decision with its figures, samples/s
of the original and of the plan after the check and their ratio, samples/s of the check's own
epoch, and the largest difference of the plan's batches from the original's. Nothing is
asserted: it measures, and runs unchanged on a GPU (``--device cuda:0``).

Usage::

    python benchmarks/batched_check.py [--pipelines demo_image letterbox] [--device cuda:0]
        [--workers 0] [--batch-size 16] [--batches 48] [--rounds 2] [--size PX] [--chosen]
        [--json out.json]
"""

from __future__ import annotations

import argparse
import functools
import json
import statistics
import time
from typing import Any

import torch
from common import compare_batches, make_loader

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.batched.settings import BatchedSettings
from codedag.optimize.manager import OptimizerManager
from codedag.trace import trace_dataloader

SMALL = {
    "demo_image": {"image_size": 128, "source_size": 256},
    "letterbox": {"img_size": 320, "min_size": 256, "max_size": 480},
    "compose": {"img_size": 224, "min_size": 256, "max_size": 400},
}


def _plan(dag: Any, device: str, chosen: bool) -> dict[str, Any]:
    if not chosen:
        return OptimizerManager(k=1, target_device=device).optimize(dag)["migration_plan"]
    manager = OptimizerManager(k=1, target_device=device, batched="always", calibrate=False)
    plan = manager.optimize(dag)["migration_plan"]
    plan["context_device_map"] = {}  # batched chains only
    for call in plan["calls"]:
        call["migrate"] = False
    plan["batched"]["mode"] = "auto"  # as if calibration had chosen them: the check applies
    return plan


def _epoch(make: Any, keep: bool = False) -> tuple[float, list[Any]]:
    """Seconds per batch of one epoch (its first batch, the start-up, excluded) and, with
    ``keep``, its batches (CPU copies: only where compared, as copies cost new memory)."""
    batches: list[Any] = []
    count = 0
    started = None
    for batch in make():
        count += 1
        if keep:
            batches.append(_cpu(batch))
        if started is None:
            started = time.perf_counter()
    elapsed = time.perf_counter() - (started or time.perf_counter())
    return elapsed / max(1, count - 1), batches


def _cpu(batch: Any) -> Any:
    if isinstance(batch, torch.Tensor):
        return batch.detach().to("cpu", copy=True)
    if isinstance(batch, tuple | list):
        return type(batch)(_cpu(b) for b in batch)
    return batch


def bench_one(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Plan one pipeline, let the check decide in one epoch, then time it against the original."""
    samples = args.batch_size * args.batches
    make = functools.partial(
        make_loader, name, args.workers, args.batch_size, samples, args.seed, args.size,
        **SMALL.get(name, {}),
    )  # fmt: skip
    tracer, _ = trace_dataloader(make())
    plan = _plan(tracer.dag, args.device, args.chosen)
    chains = [c for c in (plan.get("batched") or {}).get("chains", []) if c.get("batched")]
    row: dict[str, Any] = {"pipeline": name, "workers": args.workers, "chains": len(chains)}
    if not chains:
        row["decision"] = "no chain runs batched: nothing to check"
        return row
    migrator = PipelineMigrator.from_plan(
        plan, default_device=args.device, guard=False, batched=BatchedSettings(verify=0)
    )
    _epoch(make)  # untimed: the process's first epoch also pays for memory touched first
    with migrator:
        check_s, _ = _epoch(make)
    check = migrator.get_stats()["batched"]["check"].model_dump(mode="json")
    row["check"] = check
    row["decision"] = f"{check['state']}: {check.get('reason', '')}"
    original, after = [], []
    reference: list[Any] = []
    planned: list[Any] = []
    for r in range(args.rounds):
        last = r == args.rounds - 1
        for variant in ("original", "plan") if r % 2 == 0 else ("plan", "original"):
            if variant == "original":
                seconds, kept = _epoch(make, keep=last)
                original.append(seconds)
                reference = kept or reference
            else:
                with migrator:
                    seconds, kept = _epoch(make, keep=last)
                after.append(seconds)
                planned = kept or planned
    per_s = args.batch_size
    row["original_samples_s"] = per_s / statistics.median(original)
    row["plan_samples_s"] = per_s / statistics.median(after)
    row["ratio"] = row["plan_samples_s"] / row["original_samples_s"]
    row["check_epoch_samples_s"] = per_s / check_s
    row["max_abs_diff"] = compare_batches(reference, planned).max_abs_diff
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", nargs="+", default=["demo_image", "letterbox"])
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--workers", type=int, default=0)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--batches", type=int, default=48)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--size", type=int, default=None, help="source images of about PX px")
    parser.add_argument("--chosen", action="store_true", help="run every chain found batched")
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    args = parser.parse_args()
    print(
        f"device {args.device}, {args.workers} workers, {args.batches} batches of "
        f"{args.batch_size}, {args.rounds} rounds after the check's epoch; samples/s"
    )
    rows = []
    for name in args.pipelines:
        row = bench_one(name, args)
        rows.append(row)
        if "ratio" not in row:
            print(f"{name}: {row['decision']}", flush=True)
            continue
        print(
            f"{name}: original {row['original_samples_s']:.1f}, plan after the check "
            f"{row['plan_samples_s']:.1f} ({row['ratio']:.2f}x), the check's epoch "
            f"{row['check_epoch_samples_s']:.1f}; max |d| {row['max_abs_diff']:.3g}\n"
            f"  check: {row['decision']}",
            flush=True,
        )
    if args.json:
        with open(args.json, "w") as handle:
            json.dump(rows, handle, indent=2, default=str)


if __name__ == "__main__":
    main()

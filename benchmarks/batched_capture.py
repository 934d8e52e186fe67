"""A steady batch of an image chain eager against captured as a graph (CUDA graphs).

For demo_image and letterbox (``codedag.experiments.pipelines``) it records ``--batches`` batch
records as a DataLoader fetch makes them (the chain placed for batched execution, samples
recorded and collated), then runs them on the device through two executors: one eager, one with
a :class:`codedag.backends.batched.capture.GraphCache` (the runs of rounds all of a batch's
groups run together, :mod:`codedag.backends.batched.segments`, captured once their signature
repeats and replayed after). It prints, side by side, per pipeline:

* ms per steady batch, eager and captured (interleaved rounds of ``--repeats`` batches each, after
  warm-up batches that capture; the median round), on CUDA only (the CPU has no graphs);
* aten ops of a steady batch (counted on every device by
  :class:`codedag.measure.launches.LaunchCounter`): all of them eager; with capture, those left
  outside the graphs (the graphs' input copies and output clones included) and the graph
  launches (on the CPU a stand-in runs the kept functions, their ops counted apart);
* on CUDA, kernel launches, graph launches and copies of one steady batch as the profiler sees
  them;
* whether every captured batch equals the eager one bit for bit, and the cache's counters.

Nothing is asserted: it measures.

Usage::

    python benchmarks/batched_capture.py [--device cuda:0|cpu] [--pipelines demo_image letterbox]
        [--batch-size 32] [--batches 4] [--rounds 3] [--repeats 10] [--size 512] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Sequence
from typing import Any

import torch
from common import pipeline_sizes

from codedag.backends.batched.capture import Captured, CudaGraphs, GraphCache, Tail, identical
from codedag.backends.batched.collate import BatchRecord, default_collate_deferred
from codedag.backends.batched.deferred import deferring
from codedag.backends.batched.delivery import replace_records
from codedag.backends.batched.executor import BatchExecutor
from codedag.experiments.pipelines import demo_image, letterbox
from codedag.measure.launches import LaunchCounter
from codedag.migrate.api import PipelineMigrator
from codedag.migrate.batched.settings import BatchedSettings

CHAINS: dict[str, tuple[Any, list[str]]] = {
    "demo_image": (demo_image, ["cv2.resize", "cv2.cvtColor", "cv2.flip", "cv2.warpAffine"]),
    "letterbox": (
        letterbox,
        ["cv2.resize", "cv2.copyMakeBorder", "cv2.cvtColor", "cv2.GaussianBlur"],
    ),
}
WARMUP_BATCHES = 3  # a new signature runs eagerly, the second time it is captured, then replayed
# (a batch with a sample forced while fetched has one sample fewer in its tail: another signature)


def make_records(name: str, batches: int, batch_size: int, size: int) -> list[BatchRecord]:
    """``batches`` batch records of pipeline ``name`` at about ``size`` px."""
    module, functions = CHAINS[name]
    dataset = module.make_dataset(n=batches * batch_size, seed=3, **pipeline_sizes(name, size))
    chain = {
        "id": "chain0",
        "functions": functions,
        "entries": [],
        "entry_functions": [functions[0]],
        "batched": True,
    }
    plan = {
        "schema_version": 2,
        "context_device_map": {},
        "calls": [],
        "batched": {"mode": "always", "device": "cpu", "chains": [chain]},
    }
    migrator = PipelineMigrator.from_plan(plan, guard=False, batched=BatchedSettings(verify=0))
    found: list[BatchRecord] = []

    def keep(record: BatchRecord) -> BatchRecord:
        found.append(record)
        return record

    with migrator:
        for b in range(batches):
            with deferring():
                samples = [dataset[i] for i in range(b * batch_size, (b + 1) * batch_size)]
            with deferring(enabled=False):
                replace_records(default_collate_deferred(samples), keep)
    return found


class KeptGraphs:
    """The CPU's stand-in for CUDA graphs, for counting only: a "capture" keeps the function; a
    replay copies the inputs into static buffers, runs it (its aten ops counted apart, as the
    ops a graph would hold) and clones the outputs, as a CUDA replay does."""

    def __init__(self) -> None:
        self.inside = 0

    def capture(self, fn: Tail, inputs: Sequence[torch.Tensor]) -> Captured:
        return _Kept(self, fn, [t.clone() for t in inputs])


class _Kept:
    def __init__(self, owner: KeptGraphs, fn: Tail, static: list[torch.Tensor]) -> None:
        self.owner = owner
        self.fn = fn
        self.static = static

    def replay(self, inputs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        for buffer, value in zip(self.static, inputs, strict=True):
            buffer.copy_(value)
        with LaunchCounter() as inside:
            outs = self.fn(self.static)
        self.owner.inside += inside.total_ops
        return [out.clone() for out in outs]

    def release(self) -> None:
        pass


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def _timed_round(executor: BatchExecutor, records: list[BatchRecord], repeats: int) -> float:
    device = executor.device
    _sync(device)
    started = time.perf_counter()
    for i in range(repeats):
        executor.run(records[i % len(records)])
    _sync(device)
    return (time.perf_counter() - started) / repeats * 1e3


def _profiled(executor: BatchExecutor, record: BatchRecord) -> dict[str, int] | None:
    """Kernel launches, graph launches and copies of one batch, as the CUDA profiler sees them."""
    from torch.profiler import ProfilerActivity, profile

    try:
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            executor.run(record)
            _sync(executor.device)
    except Exception as error:  # the profiler is optional here
        print(f"  (profiler: {type(error).__name__}: {error})", file=sys.stderr)
        return None
    counts = {"kernels": 0, "graphs": 0, "copies": 0}
    for event in prof.key_averages():
        name = event.key
        if "GraphLaunch" in name:
            counts["graphs"] += event.count
        elif "LaunchKernel" in name:
            counts["kernels"] += event.count
        elif name.startswith(("cudaMemcpy", "cuMemcpy")):
            counts["copies"] += event.count
    return counts


def measure(name: str, args: argparse.Namespace, device: torch.device) -> dict[str, Any]:
    """One pipeline's row: eager and captured side by side."""
    records = make_records(name, args.batches, args.batch_size, args.size)
    cuda = device.type == "cuda"
    kept = KeptGraphs()
    cache = GraphCache(CudaGraphs() if cuda else kept)
    eager = BatchExecutor(device, chunk_bytes=0, sync_free=True)
    captured = BatchExecutor(device, chunk_bytes=0, sync_free=True, capture=cache)
    identical_batches = True
    for i in range(max(WARMUP_BATCHES, 2 * len(records))):  # every signature captured
        record = records[i % len(records)]
        a = eager.run(record).tensor
        b = captured.run(record).tensor
        identical_batches = identical_batches and identical(a, b)
    steady = records[-1]
    with LaunchCounter() as counted:
        eager.run(steady)
    replays, inside = cache.stats.replays, kept.inside
    with LaunchCounter() as outside:  # a graph's replay is no aten op: its copies and clones are
        captured.run(steady)
    row: dict[str, Any] = {
        "pipeline": name,
        "device": str(device),
        "batch_size": args.batch_size,
        "size": args.size,
        "eager_aten_ops": counted.total_ops,
        "captured_aten_ops": outside.total_ops - (kept.inside - inside),
        "graphs": cache.stats.replays - replays,
    }
    if cuda:
        rounds: dict[str, list[float]] = {"eager": [], "captured": []}
        for _ in range(args.rounds):
            rounds["eager"].append(_timed_round(eager, records, args.repeats))
            rounds["captured"].append(_timed_round(captured, records, args.repeats))
        row["eager_ms"] = round(statistics.median(rounds["eager"]), 3)
        row["captured_ms"] = round(statistics.median(rounds["captured"]), 3)
        row["eager_launches"] = _profiled(eager, steady)
        row["captured_launches"] = _profiled(captured, steady)
    row["identical"] = identical_batches
    row["capture"] = cache.stats.as_dict()
    return row


def _table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| pipeline | ms/batch eager | ms/batch captured | aten ops eager | aten ops captured "
        "(outside graphs + graph launches) | launches eager | launches captured | identical |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['pipeline']} | {r.get('eager_ms', 'n/a (no graphs on the CPU)')} "
            f"| {r.get('captured_ms', 'n/a')} | {r['eager_aten_ops']} "
            f"| {r['captured_aten_ops']} + {r['graphs']} graphs "
            f"| {_launches(r.get('eager_launches'))} | {_launches(r.get('captured_launches'))} "
            f"| {'yes' if r['identical'] else 'NO'} |"
        )
    return "\n".join(lines)


def _launches(counts: dict[str, int] | None) -> str:
    if not counts:
        return "n/a"
    return f"{counts['kernels']} kernels, {counts['graphs']} graphs, {counts['copies']} copies"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = "cuda:0" if torch.cuda.is_available() else "cpu"
    parser.add_argument("--device", default=default)
    parser.add_argument("--pipelines", nargs="+", default=list(CHAINS), choices=list(CHAINS))
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--batches", type=int, default=4, help="distinct batch records")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=10, help="batches per timed round")
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.batches < 2 or args.batch_size < 1 or args.rounds < 1 or args.repeats < 1:
        parser.error("--batches must be at least 2; --batch-size, --rounds, --repeats at least 1")
    device = torch.device(args.device)
    rows = [measure(name, args, device) for name in args.pipelines]
    print(_table(rows))
    for r in rows:
        print(f"{r['pipeline']}: capture {r['capture']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as out:
            json.dump(rows, out, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

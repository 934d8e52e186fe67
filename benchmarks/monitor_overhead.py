"""Overhead of ExperimentMonitor on a CPU training loop: step time with vs without, side by side.

One process trains a small MLP on random data (torch on the CPU, one thread) in four cases:
no monitor, the monitor with resource sampling off, sampling every 1.0 s, and every 0.1 s. Cases
run interleaved in rounds (A B C D, A B C D, ...) so machine-load drift hits every case alike; each
case's figures are the median and the minimum over rounds of (run wall time / batches), measured
outside the monitor (on a shared machine the minimum is the less noisy one: load only adds time).
Also printed: the sampler's own CPU use (its thread's CPU time, measured by ResourceMonitor) and the
cost of the monitor calls one batch makes (start_batch, end_batch, log_loss) in a tight loop, as a
share of the unmonitored batch time.

    .venv/bin/python benchmarks/monitor_overhead.py [--batches 800] [--rounds 7]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import torch

from codedag.monitor.experiment import ExperimentMonitor

CASES: list[tuple[str, float | None, bool]] = [
    # name, resource interval (None: no sampling), monitor on
    ("no monitor", None, False),
    ("monitor, no sampling", None, True),
    ("monitor, sampling 1.0 s", 1.0, True),
    ("monitor, sampling 0.1 s", 0.1, True),
]


def make_model() -> tuple[torch.nn.Module, torch.optim.Optimizer]:
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(256, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10)
    )
    return model, torch.optim.SGD(model.parameters(), lr=0.01)


def train(batches: int, data: list[tuple[torch.Tensor, torch.Tensor]], monitor: Any) -> float:
    """Seconds per batch of the seed's loop, with ``monitor`` calls when one is given."""
    model, optimizer = make_model()
    criterion = torch.nn.CrossEntropyLoss()
    start = time.perf_counter()
    for batch_idx in range(batches):
        inputs, targets = data[batch_idx % len(data)]
        if monitor is not None:
            monitor.start_batch()
        optimizer.zero_grad()
        loss = criterion(model(inputs), targets)
        loss.backward()
        optimizer.step()
        if monitor is not None:
            monitor.end_batch(len(inputs))
            monitor.log_loss(0, batch_idx, loss.item())
        else:
            loss.item()
    return (time.perf_counter() - start) / batches


def hot_path_us(folder: Path, n: int = 100_000) -> float:
    """Microseconds of the monitor calls one batch of ``train`` makes."""
    monitor = ExperimentMonitor("hot", run_dir=folder / "hot")
    monitor.start_mode("hot", resource_interval=None)
    start = time.perf_counter()
    for i in range(n):
        monitor.start_batch()
        monitor.end_batch(64)
        monitor.log_loss(0, i, 0.5)
    elapsed = time.perf_counter() - start
    monitor.stop_mode()
    return elapsed / n * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=800)
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    torch.set_num_threads(1)
    data = [(torch.randn(64, 256), torch.randint(0, 10, (64,))) for _ in range(16)]
    train(200, data, None)  # warm-up: allocator, autograd
    per_batch: dict[str, list[float]] = {name: [] for name, _, _ in CASES}
    sampler: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in CASES}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        for round_idx in range(args.rounds):
            for name, interval, on in CASES:
                if not on:
                    per_batch[name].append(train(args.batches, data, None))
                    continue
                monitor = ExperimentMonitor(
                    "overhead", run_dir=folder / f"r{round_idx}", cuda_timing="none"
                )
                monitor.start_mode(name, resource_interval=interval)
                per_batch[name].append(train(args.batches, data, monitor))
                summary = monitor.stop_mode()
                res = summary.get("resources")
                if res:
                    sampler[name].append(res)
        pair_us = hot_path_us(folder)
    base = statistics.median(per_batch["no monitor"])
    base_min = min(per_batch["no monitor"])
    print(
        f"CPU training loop: MLP 256-512-10, batch 64, {args.batches} batches per run, "
        f"{args.rounds} interleaved rounds, torch threads 1"
    )
    print(f"{'case':<26} {'median ms':>10} {'ratio':>7} {'min ms':>8} {'ratio':>7}  runs ms/batch")
    for name, _, _ in CASES:
        med, low = statistics.median(per_batch[name]), min(per_batch[name])
        runs = " ".join(f"{1e3 * v:.3f}" for v in per_batch[name])
        print(
            f"{name:<26} {1e3 * med:>10.3f} {med / base:>7.4f} {1e3 * low:>8.3f} "
            f"{low / base_min:>7.4f}  {runs}"
        )
    print()
    print(f"{'sampler':<26} {'samples/run':>12} {'CPU ms/sample':>14} {'CPU % of a core':>16}")
    for name, interval, _ in CASES:
        if interval is None or not sampler[name]:
            continue
        runs = sampler[name]
        samples = statistics.mean(r["samples"] for r in runs)
        cpu_s = sum(r["sampler_cpu_s"] for r in runs)
        per_sample_ms = 1e3 * cpu_s / max(1, sum(r["samples"] for r in runs))
        pct = statistics.mean(r["sampler_cpu_pct"] for r in runs)
        print(f"{name:<26} {samples:>12.1f} {per_sample_ms:>14.3f} {pct:>16.3f}")
    print()
    print(
        f"monitor calls per batch (start_batch, end_batch, log_loss), tight loop: {pair_us:.2f} us"
        f" = {100 * pair_us * 1e-6 / base_min:.2f}% of the fastest unmonitored batch"
    )


if __name__ == "__main__":
    main()

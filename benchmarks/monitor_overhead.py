"""What does ExperimentMonitor cost a training loop? Side by side in one run.

A small CPU training loop (MLP, batch 64, one torch thread) runs in rounds; each round runs the
same number of steps without the monitor, with it sampling every 1.0 s, and every 0.1 s, in a
rotating order. Reported: the mean step time of each condition, its ratio to the unmonitored loop
(median over rounds), and the resource sampler's own CPU time and share of wall time.

    .venv/bin/python benchmarks/monitor_overhead.py [--rounds 5] [--steps 400]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path


def make_step() -> Callable[[], float]:
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)
    )
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = torch.nn.CrossEntropyLoss()
    x = torch.randn(64, 512)
    y = torch.randint(0, 10, (64,))

    def step() -> float:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return float(loss.item())

    return step


def run(
    step: Callable[[], float], steps: int, interval: float | None, out: Path
) -> tuple[float, dict | None]:
    """Seconds per step; no monitor for ``interval=-1``, no sampler for ``None``."""
    from codedag.monitor.experiment import ExperimentMonitor

    if interval == -1:
        t0 = time.perf_counter()
        for i in range(steps):
            loss = step()
            _ = (i, loss)
        return (time.perf_counter() - t0) / steps, None
    monitor = ExperimentMonitor("overhead", out, run_dir=out / f"run_{interval}_{time.time_ns()}")
    monitor.start_mode("baseline", resource_interval=interval)
    t0 = time.perf_counter()
    for i in range(steps):
        monitor.start_batch()
        loss = step()
        monitor.end_batch()
        monitor.log_loss(0, i, loss)
    elapsed = time.perf_counter() - t0
    summary = monitor.stop_mode()
    return elapsed / steps, summary.get("resources")


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=400)
    args = parser.parse_args()
    torch.set_num_threads(1)
    step = make_step()
    for _ in range(50):  # warm-up
        step()
    conditions: list[tuple[str, float | None]] = [
        ("none", -1),
        ("no sampler", None),
        ("1.0 s", 1.0),
        ("0.1 s", 0.1),
    ]
    times: dict[str, list[float]] = {name: [] for name, _ in conditions}
    ratios: dict[str, list[float]] = {name: [] for name, _ in conditions}
    sampler: dict[str, list[tuple[float, float, int]]] = {name: [] for name, _ in conditions}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = conditions[r % 4 :] + conditions[: r % 4]
            got: dict[str, float] = {}
            for name, interval in order:
                per_step, res = run(step, args.steps, interval, Path(tmp))
                got[name] = per_step
                times[name].append(per_step)
                if res is not None:
                    sampler[name].append(
                        (res["sampler_cpu_s"], res["sampler_cpu_pct"], res["samples"])
                    )
            for name in got:
                ratios[name].append(got[name] / got["none"])
    print(f"monitor overhead: {args.rounds} rounds x {args.steps} steps, torch threads = 1")
    print(
        f"{'sampling':>12} {'step ms':>9} {'ratio (median)':>15} {'ratio min..max':>16} "
        f"{'sampler CPU s':>14} {'sampler CPU %':>14} {'samples':>8}"
    )
    for name, _ in conditions:
        mean_ms = 1e3 * statistics.mean(times[name])
        ratio = statistics.median(ratios[name])
        spread = f"{min(ratios[name]):.3f}..{max(ratios[name]):.3f}"
        if sampler[name]:
            cpu_s = statistics.mean(s[0] for s in sampler[name])
            cpu_pct = statistics.mean(s[1] for s in sampler[name])
            samples = statistics.mean(s[2] for s in sampler[name])
            extra = f"{cpu_s:>14.4f} {cpu_pct:>13.2f}% {samples:>8.1f}"
        else:
            extra = f"{'-':>14} {'-':>14} {'-':>8}"
        print(f"{name:>12} {mean_ms:>9.3f} {ratio:>15.4f} {spread:>16} {extra}")
    per_call_us = monitor_call_cost_us()
    base_ms = 1e3 * statistics.mean(times["none"])
    print(
        f"monitor calls alone (start_batch + end_batch + log_loss, no training): "
        f"{per_call_us:.2f} us per step = {100 * per_call_us / (1e3 * base_ms):.3f}% of a "
        f"{base_ms:.2f} ms step"
    )


def monitor_call_cost_us(steps: int = 50_000) -> float:
    """Microseconds the per-step monitor calls cost, measured without any training work."""
    from codedag.monitor.experiment import ExperimentMonitor

    with tempfile.TemporaryDirectory() as tmp:
        monitor = ExperimentMonitor("calls", tmp)
        monitor.start_mode("baseline", resource_interval=None)
        t0 = time.perf_counter()
        for i in range(steps):
            monitor.start_batch()
            monitor.end_batch()
            monitor.log_loss(0, i, 0.5)
        elapsed = time.perf_counter() - t0
        monitor.stop_mode()
    return 1e6 * elapsed / steps


if __name__ == "__main__":
    main()

"""What does ExperimentMonitor cost a training loop? Side by side in one run.

A small CPU training loop (MLP, batch 64, one torch thread) runs in rounds; each round runs the
same number of steps without the monitor, with it sampling every 1.0 s and every 0.1 s, and at
1.0 s with its TensorBoard sink, its MLflow sink (a local SQLite store, created before the rounds)
and both, in a rotating order. Reported: the mean step time of each condition, its ratio to the
unmonitored loop (median over rounds, and the spread), the process's CPU time per step against
the unmonitored loop's (sinks work on threads of their own: this is their whole cost), and the
resource sampler's own CPU time and share of wall time. Sinks whose package is missing are left
out with a note.

Step-time ratios on a shared machine carry several percent of noise, more than the monitor
costs. A second table therefore measures the cost itself: the same conditions around a step that
sleeps (``--sleep-ms``, no CPU of its own), so the process's CPU time is what the monitor, its
sampler and its sinks' threads spend. Each condition runs ``--short`` and ``4 x --short`` steps:
the difference over the extra steps is the steady-state CPU cost per step (given as a share of
the step time), the rest the fixed cost of a run (creating the MLflow run, the summary and
artifacts at its end, closing the files), which a long training run pays once. The ``null
timer`` condition is the least any step timer does (two ``perf_counter`` calls and a list
append, no codedag): after a sleep the CPU runs cold, and that floor shows what any Python code
pays there, apart from what the monitor adds. The process's CPU counts the monitor's other
threads as if the step waited for them; it is an upper bound. What the training thread itself
loses is the ``calls`` column: the per-step calls timed where they run. Each run starts after a
garbage collection, so one condition does not pay for the garbage another left.

A third table runs the same conditions around a step that computes for about ``--busy-ms``
(the MLP step repeated): the time the per-step calls take on the training thread (read around
the calls) and the CPU time of every other thread (the sampler, its folds, the sinks' writers;
``--short`` and ``4 x --short`` steps, the difference per step), against the step time.

    .venv/bin/python benchmarks/monitor_overhead.py [--rounds 5] [--steps 1500] [--short 300]
"""

from __future__ import annotations

import argparse
import gc
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


def make_sinks(kinds: tuple[str, ...], out: Path, mlflow_uri: str) -> list:
    """The sinks of one condition, made fresh for each run."""
    sinks: list = []
    if "tensorboard" in kinds:
        from codedag.monitor.sinks.tensorboard import TensorBoardSink

        sinks.append(TensorBoardSink(out / "tensorboard"))
    if "mlflow" in kinds:
        from codedag.monitor.sinks.mlflow import MlflowSink

        sinks.append(MlflowSink(mlflow_uri, "overhead", close_timeout_s=120))
    return sinks


NONE, NULL_TIMER = -1.0, -2.0  # the conditions without codedag: no timer, the least timer


def run(
    step: Callable[[], float],
    steps: int,
    interval: float | None,
    out: Path,
    sinks: list | None = None,
) -> tuple[float, float, dict | None]:
    """Seconds and process CPU seconds per step; no monitor for ``NONE``, the least timer for
    ``NULL_TIMER``, no sampler for ``None``. The CPU time includes the sinks' finishing work at
    ``close()``."""
    from codedag.monitor.experiment import ExperimentMonitor

    gc.collect()  # garbage left by earlier conditions is not this one's cost
    if interval == NONE:
        c0, t0 = time.process_time(), time.perf_counter()
        for i in range(steps):
            loss = step()
            _ = (i, loss)
        return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps, None
    if interval == NULL_TIMER:
        clock, rows = time.perf_counter, []
        c0, t0 = time.process_time(), time.perf_counter()
        for i in range(steps):
            begin = clock()
            loss = step()
            rows.append((i, begin, clock(), loss))
        return (time.perf_counter() - t0) / steps, (time.process_time() - c0) / steps, None
    monitor = ExperimentMonitor(
        "overhead", out, run_dir=out / f"run_{interval}_{time.time_ns()}", sinks=sinks or []
    )
    monitor.start_mode("baseline", resource_interval=interval)
    c0, t0 = time.process_time(), time.perf_counter()
    for i in range(steps):
        monitor.start_batch()
        loss = step()
        monitor.end_batch()
        monitor.log_loss(0, i, loss)
    elapsed = time.perf_counter() - t0
    summary = monitor.stop_mode()
    monitor.close()
    cpu = time.process_time() - c0
    return elapsed / steps, cpu / steps, summary.get("resources")


def timed_run(
    step: Callable[[], float], steps: int, interval: float | None, sinks: list, out: Path
) -> tuple[float, float, float]:
    """Run ``steps`` steps under a condition (no monitor for ``NONE``, the least timer for
    ``NULL_TIMER``, no sampler for ``None``): seconds the per-step calls took on the training
    thread, read around them (every condition reads the clock as often, calls or not), and the
    CPU seconds of the process and of the training thread (the sinks' finishing work at
    ``close()`` included)."""
    from codedag.monitor.experiment import ExperimentMonitor

    clock, rows, inside = time.perf_counter, [], 0.0
    monitor = None
    if interval is None or interval >= 0:
        monitor = ExperimentMonitor(
            "overhead", out, run_dir=out / f"timed_{time.time_ns()}", sinks=sinks
        )
        monitor.start_mode("baseline", resource_interval=interval)
    gc.collect()  # garbage left by earlier conditions is not this one's cost
    main0, cpu0 = time.thread_time(), time.process_time()
    for i in range(steps):
        t0 = clock()
        if monitor is not None:
            monitor.start_batch()
        elif interval == NULL_TIMER:
            begin = clock()
        t1 = clock()
        loss = step()
        t2 = clock()
        if monitor is not None:
            monitor.end_batch()
            monitor.log_loss(0, i, loss)
        elif interval == NULL_TIMER:
            rows.append((i, begin, clock(), loss))
        inside += (t1 - t0) + (clock() - t2)
    if monitor is not None:
        monitor.stop_mode()
        monitor.close()
    return inside, time.process_time() - cpu0, time.thread_time() - main0


def sleeping_costs(
    steps: int, interval: float | None, out: Path, sinks: list | None, sleep_s: float
) -> tuple[float, float]:
    """Process CPU microseconds of a run of ``steps`` sleeping steps, and microseconds the
    per-step calls took on the training thread (see :func:`timed_run`)."""

    def step() -> float:
        time.sleep(sleep_s)
        return 0.5

    inside, cpu, _ = timed_run(step, steps, interval, sinks or [], out)
    return 1e6 * cpu, 1e6 * inside


def busy_costs(
    step: Callable[[], float], steps: int, interval: float, sinks: list, out: Path
) -> tuple[float, float]:
    """Seconds the per-step calls took on the training thread, and CPU seconds of every other
    thread (their finishing work at ``close()`` included), for a run of ``steps`` steps."""
    inside, cpu, main = timed_run(step, steps, interval, sinks, out)
    return inside, cpu - main


def busy_table(
    step: Callable[[], float],
    step_s: float,
    conditions: list[tuple[str, float | None, tuple[str, ...]]],
    args: argparse.Namespace,
    root: Path,
    mlflow_uri: str,
) -> list[str]:
    """The third table: the conditions sampling at 1 s around a CPU-busy step, as lines."""
    repeat = max(1, round(args.busy_ms / (1e3 * step_s)))

    def busy() -> float:
        for _ in range(repeat - 1):
            step()
        return step()

    short, long = args.short, 4 * args.short
    names = [c[0] for c in conditions if c[0] in ("none", "null timer") or c[0].startswith("1.0")]
    inside_us: dict[str, list[float]] = {name: [] for name in names}
    others_us: dict[str, list[float]] = {name: [] for name in names}
    step_ms: list[float] = []
    for r in range(3):
        for name, interval, kinds in conditions:
            if name not in names:
                continue
            got = []
            for n in (short, long):
                sinks = make_sinks(kinds, root / f"b{r}_{n}_{name.replace(' ', '_')}", mlflow_uri)
                t0 = time.perf_counter()
                got.append(busy_costs(busy, n, interval or 0.0, sinks, root))
                if name == "none":
                    step_ms.append(1e3 * (time.perf_counter() - t0) / n)
            inside_us[name].append(1e6 * got[1][0] / long)
            others_us[name].append(1e6 * (got[1][1] - got[0][1]) / (long - short))
    ms = statistics.median(step_ms)
    lines = [
        f"Around a CPU-busy step ({repeat} MLP steps, {ms:.2f} ms), runs of {short} and {long} "
        "steps (median of 3):",
        f"{'condition':>20} {'calls us/step':>14} {'other threads us/step':>22} "
        f"{'total over none':>16} {'% of step':>10}",
    ]
    none_inside = statistics.median(inside_us["none"])
    none_others = statistics.median(others_us["none"])
    for name in names:
        calls = statistics.median(inside_us[name]) - none_inside
        others = statistics.median(others_us[name]) - none_others
        total = calls + others
        lines.append(
            f"{name:>20} {calls:>14.1f} {others:>22.1f} {total:>16.1f} "
            f"{100 * total / (1e3 * ms):>9.3f}%"
        )
    return lines


def available(kind: str) -> bool:
    """Whether a sink's package imports here."""
    import importlib.util

    module = {"tensorboard": "tensorboard", "mlflow": "mlflow"}[kind]
    return importlib.util.find_spec(module) is not None


def main() -> None:
    import logging

    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--sleep-ms", type=float, default=10.0)
    parser.add_argument("--short", type=int, default=300, help="steps of the short sleeping runs")
    parser.add_argument("--busy-ms", type=float, default=10.0, help="CPU-busy step length")
    args = parser.parse_args()
    logging.getLogger("alembic").setLevel(logging.WARNING)
    logging.getLogger("mlflow").setLevel(logging.WARNING)
    torch.set_num_threads(1)
    step = make_step()
    for _ in range(50):  # warm-up
        step()
    conditions: list[tuple[str, float | None, tuple[str, ...]]] = [
        ("none", NONE, ()),
        ("null timer", NULL_TIMER, ()),
        ("no sampler", None, ()),
        ("1.0 s", 1.0, ()),
        ("0.1 s", 0.1, ()),
        ("1.0 s + tensorboard", 1.0, ("tensorboard",)),
        ("1.0 s + mlflow", 1.0, ("mlflow",)),
        ("1.0 s + both", 1.0, ("tensorboard", "mlflow")),
    ]
    missing = sorted({k for _, _, kinds in conditions for k in kinds if not available(k)})
    for kind in missing:
        print(f"note: {kind} is not installed; its conditions are left out")
    conditions = [c for c in conditions if not set(c[2]) & set(missing)]
    names = [name for name, _, _ in conditions]
    times: dict[str, list[float]] = {name: [] for name in names}
    cpus: dict[str, list[float]] = {name: [] for name in names}
    ratios: dict[str, list[float]] = {name: [] for name in names}
    cpu_ratios: dict[str, list[float]] = {name: [] for name in names}
    sampler: dict[str, list[tuple[float, float, int]]] = {name: [] for name in names}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        mlflow_uri = f"sqlite:///{root / 'mlflow.db'}"
        if "mlflow" not in missing:  # the store's tables are created once, before the rounds
            import os

            os.chdir(root)  # MLflow's local store keeps artifacts in ./mlruns
            run(step, 10, None, root, make_sinks(("mlflow",), root, mlflow_uri))
        for r in range(args.rounds):
            shift = r % len(conditions)
            order = conditions[shift:] + conditions[:shift]
            got: dict[str, tuple[float, float]] = {}
            for name, interval, kinds in order:
                sinks = make_sinks(kinds, root / f"{r}_{len(got)}", mlflow_uri)
                per_step, cpu, res = run(step, args.steps, interval, root, sinks)
                got[name] = (per_step, cpu)
                times[name].append(per_step)
                cpus[name].append(cpu)
                if res is not None:
                    sampler[name].append(
                        (res["sampler_cpu_s"], res["sampler_cpu_pct"], res["samples"])
                    )
            for name in got:
                ratios[name].append(got[name][0] / got["none"][0])
                cpu_ratios[name].append(got[name][1] / got["none"][1])
        sleep_s = args.sleep_ms / 1e3
        short, long = args.short, 4 * args.short
        per_step: dict[str, list[float]] = {name: [] for name in names}
        fixed: dict[str, list[float]] = {name: [] for name in names}
        calls: dict[str, list[float]] = {name: [] for name in names}
        for r in range(3):
            for name, interval, kinds in conditions:
                costs = []
                for n in (short, long):
                    out = root / f"s{r}_{n}_{name.replace(' ', '_')}"
                    costs.append(
                        sleeping_costs(
                            n, interval, root, make_sinks(kinds, out, mlflow_uri), sleep_s
                        )
                    )
                slope = (costs[1][0] - costs[0][0]) / (long - short)
                per_step[name].append(slope)
                fixed[name].append(costs[0][0] - short * slope)
                calls[name].append(costs[1][1] / long)
        busy_lines = busy_table(
            step, statistics.mean(times["none"]), conditions, args, root, mlflow_uri
        )
    print(f"monitor overhead: {args.rounds} rounds x {args.steps} steps, torch threads = 1")
    print(
        f"{'condition':>20} {'step ms':>8} {'ratio (median)':>15} {'ratio min..max':>15} "
        f"{'CPU/step ratio':>15} {'sampler CPU %':>14} {'samples':>8}"
    )
    for name in names:
        mean_ms = 1e3 * statistics.mean(times[name])
        ratio = statistics.median(ratios[name])
        spread = f"{min(ratios[name]):.3f}..{max(ratios[name]):.3f}"
        cpu_ratio = statistics.median(cpu_ratios[name])
        if sampler[name]:
            cpu_pct = statistics.mean(s[1] for s in sampler[name])
            samples = statistics.mean(s[2] for s in sampler[name])
            extra = f"{cpu_pct:>13.2f}% {samples:>8.1f}"
        else:
            extra = f"{'-':>14} {'-':>8}"
        print(f"{name:>20} {mean_ms:>8.3f} {ratio:>15.4f} {spread:>15} {cpu_ratio:>15.4f} {extra}")
    print(
        f"Around a {args.sleep_ms:g} ms sleeping step, runs of {short} and {long} steps (median "
        "of 3). CPU: the whole process, the monitor's threads included (an upper bound of what "
        "the step pays); calls: the time the per-step calls took on the training thread:"
    )
    print(
        f"{'condition':>20} {'CPU us/step':>12} {'over none':>10} {'% of step':>10} "
        f"{'over null':>10} {'% of step':>10} {'calls us/step':>14} {'% of step':>10} "
        f"{'fixed ms/run':>13}"
    )
    none_us = statistics.median(per_step["none"])
    null_us = statistics.median(per_step["null timer"])
    none_fixed = statistics.median(fixed["none"])
    none_calls = statistics.median(calls["none"])
    for name in names:
        us = statistics.median(per_step[name])
        extra, above_null = us - none_us, us - null_us
        share = 100 * extra / (1e3 * args.sleep_ms)
        share_null = 100 * above_null / (1e3 * args.sleep_ms)
        call_us = statistics.median(calls[name]) - none_calls
        run_ms = (statistics.median(fixed[name]) - none_fixed) / 1e3
        print(
            f"{name:>20} {us:>12.1f} {extra:>10.1f} {share:>9.3f}% {above_null:>10.1f} "
            f"{share_null:>9.3f}% {call_us:>14.1f} {100 * call_us / (1e3 * args.sleep_ms):>9.3f}% "
            f"{run_ms:>13.1f}"
        )
    for line in busy_lines:
        print(line)
    per_call_us = monitor_call_cost_us()
    null_call_us = null_call_cost_us()
    base_ms = 1e3 * statistics.mean(times["none"])
    print(
        f"monitor calls alone (start_batch + end_batch + log_loss, no training): "
        f"{per_call_us:.2f} us per step = {100 * per_call_us / (1e3 * base_ms):.3f}% of a "
        f"{base_ms:.2f} ms step; the null timer's calls: {null_call_us:.2f} us"
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


def null_call_cost_us(steps: int = 50_000) -> float:
    """Microseconds of the null timer's per-step work in the same tight loop."""
    clock, rows = time.perf_counter, []
    t0 = time.perf_counter()
    for i in range(steps):
        begin = clock()
        rows.append((i, begin, clock(), 0.5))
    return 1e6 * (time.perf_counter() - t0) / steps


if __name__ == "__main__":
    main()

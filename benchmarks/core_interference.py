"""How much work on one CPU slows another: whether a second thread's work is free on this machine.

codedag moves some work off the loading thread (the prefix cache's writer, the planner's import
in the background). On a machine whose CPUs are independent cores that work costs the loading
thread nothing; on one whose CPUs share a physical core (SMT siblings) or a host CPU (a
virtual machine's vCPUs), it slows the loading thread, whatever the topology files say. This
pins itself to the first CPU, times a pure-Python loop and a NumPy sort there alone, then while
a process pinned to the second CPU spins, alternating ``--rounds`` times, and prints the medians
and the slowdown side by side. It asserts nothing.

    python benchmarks/core_interference.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import statistics
import time
from collections.abc import Callable
from multiprocessing.synchronize import Event

import numpy as np


def spin(cpu: int, stop: Event) -> None:
    """Keep ``cpu`` busy with Python work until ``stop`` is set."""
    os.sched_setaffinity(0, {cpu})
    count = 0
    while not stop.is_set():
        for _ in range(100_000):
            count += 1


def python_loop() -> float:
    """Seconds of a pure-Python loop (the interpreter's work: codedag's bookkeeping)."""
    start = time.perf_counter()
    total = 0
    for i in range(3_000_000):
        total += i
    return time.perf_counter() - start


def numpy_sort() -> float:
    """Seconds of NumPy sorts of 2 million floats (memory-bound library work)."""
    values = np.random.default_rng(0).random(2_000_000)
    start = time.perf_counter()
    for _ in range(10):
        np.sort(values)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("core_interference.py: this process may use one CPU only")
    here, other = cpus[0], cpus[1]
    os.sched_setaffinity(0, {here})
    works: dict[str, Callable[[], float]] = {"python loop": python_loop, "numpy sort": numpy_sort}
    alone: dict[str, list[float]] = {name: [] for name in works}
    beside: dict[str, list[float]] = {name: [] for name in works}
    for _ in range(args.rounds):
        for name, work in works.items():
            alone[name].append(work())
        stop = mp.get_context("fork").Event()
        busy = mp.get_context("fork").Process(target=spin, args=(other, stop))
        busy.start()
        time.sleep(0.2)
        try:
            for name, work in works.items():
                beside[name].append(work())
        finally:
            stop.set()
            busy.join()
    print(f"CPU {here}, CPU {other} idle or busy; medians of {args.rounds} alternating rounds")
    print(f"{'work':12} {'alone s':>8} {'beside s':>9} {'slowdown':>9}")
    for name in works:
        a, b = statistics.median(alone[name]), statistics.median(beside[name])
        print(f"{name:12} {a:8.3f} {b:9.3f} {b / a:8.2f}x")


if __name__ == "__main__":
    main()

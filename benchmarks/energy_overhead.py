"""Overhead of energy measurement on a CPU-bound child: run time with vs without, one run each.

Runs the same CPU-bound Python child (a pure-Python loop, one thread) through codedag's runner:
without any meter, then with each meter a session can use around it, and prints the run times and
their ratios to the unmetered run side by side. On a machine without NVML the GPU sampler runs over
the fake NVML (the sampling thread's cost, not the driver's); the perf meter is measured only when
``perf`` has power events (here its energy reads 0 J, but its counting cost is real).

    .venv/bin/python benchmarks/energy_overhead.py [--loops 30000000]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from codedag.devices.cpu_energy import perf_power_events, probe_cpu_energy
from codedag.devices.fake_nvml import FakeGPU, FakeNVML
from codedag.devices.gpus import NvmlGPUs, open_gpus
from codedag.energy.gpu_meter import GpuEnergyMeter
from codedag.energy.meters import PerfCpuMeter, cpu_meter_factory
from codedag.energy.process import run_command


def timed_run(loops: int, folder: Path, meters: Callable[[], list]) -> float:
    code = f"s = 0\nfor i in range({loops}):\n    s += i * i\nprint(s)"
    active = meters()
    for meter in active:
        meter.start()
    start = time.perf_counter()
    run_command([sys.executable, "-c", code], folder / "child.log")
    elapsed = time.perf_counter() - start
    for meter in active:
        meter.stop()
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loops", type=int, default=30_000_000)
    args = parser.parse_args()
    probe = probe_cpu_energy()
    real_gpus = open_gpus()
    fake = NvmlGPUs(FakeNVML([FakeGPU()]), environ={})
    cases: list[tuple[str, Callable[[], list]]] = [
        ("no meter", list),
        (
            f"CPU meter as probed here ({probe.source or 'unavailable'})",
            lambda: [cpu_meter_factory(probe)()],
        ),
    ]
    if real_gpus.count():
        cases.append(
            ("NVML sampler 0.1 s, real GPUs", lambda: [GpuEnergyMeter(real_gpus, None, 0.1)])
        )
    cases += [
        ("fake-NVML sampler every 0.1 s", lambda: [GpuEnergyMeter(fake, None, 0.1)]),
        ("fake-NVML sampler every 0.01 s", lambda: [GpuEnergyMeter(fake, None, 0.01)]),
    ]
    events = perf_power_events()
    if events:
        cases.append((f"perf stat -a on {','.join(events)}", lambda: [PerfCpuMeter(events)]))
    with tempfile.TemporaryDirectory() as tmp:
        times = [(name, timed_run(args.loops, Path(tmp), make)) for name, make in cases]
    base = times[0][1]
    print(f"CPU-bound child, {args.loops} loop iterations, one run per case")
    print(f"{'case':<45} {'run time s':>10} {'ratio':>7}")
    for name, elapsed in times:
        print(f"{name:<45} {elapsed:>10.3f} {elapsed / base:>7.3f}")
    print(
        "NVML counter vs integrated power over a 30 s GPU load: needs a CUDA machine (none here)."
    )
    real_gpus.close()
    fake.close()


if __name__ == "__main__":
    main()

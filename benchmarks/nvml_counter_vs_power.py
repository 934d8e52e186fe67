"""GPU energy of a 30 s load: NVML's energy counter vs integrated power samples (needs CUDA).

Runs a matrix-multiply load on GPU 0 in a child process for ``--seconds`` and measures the window
with :class:`codedag.energy.gpu_meter.GpuEnergyMeter` at two sampling intervals at once: the
counter difference, and the trapezoid integral of the power samples over their real timestamps.
Prints both and their ratios. Without NVML and a CUDA device it says so and exits 1.

    .venv/bin/python benchmarks/nvml_counter_vs_power.py [--seconds 30]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path

from codedag.devices.gpus import open_gpus
from codedag.energy.gpu_meter import GpuEnergyMeter
from codedag.energy.process import run_command

LOAD = """
import sys, time, torch
x = torch.randn(8192, 8192, device="cuda")
end = time.monotonic() + float(sys.argv[1])
while time.monotonic() < end:
    y = x @ x
    torch.cuda.synchronize()
print("done")
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    args = parser.parse_args()
    gpus = open_gpus()
    if gpus.count() == 0:
        print(f"needs a CUDA machine with NVML: {gpus.reason}")
        return 1
    fine = GpuEnergyMeter(gpus, [0], interval_s=0.1)
    coarse = GpuEnergyMeter(gpus, [0], interval_s=1.0)
    fine.start()
    coarse.start()
    with tempfile.TemporaryDirectory() as tmp:
        env = {"CUDA_VISIBLE_DEVICES": "0"}
        result = run_command(
            [sys.executable, "-c", LOAD, str(args.seconds)],
            Path(tmp) / "load.log",
            env={**os.environ, **env},
        )
    a, b = fine.stop(), coarse.stop()
    gpus.close()
    counter = a.counter_j[0]
    if counter is None:
        print("this GPU has no NVML energy counter (nvmlDeviceGetTotalEnergyConsumption)")
        return 1
    print(f"load: exit {result.exit_code}, {result.duration_s:.1f} s")
    print(f"{'quantity':<40} {'joules':>10} {'vs counter':>10}")
    print(f"{'NVML energy counter':<40} {counter:>10.1f} {1.0:>10.3f}")
    for name, reading in (
        ("integrated power, 0.1 s samples", a),
        ("integrated power, 1 s samples", b),
    ):
        value = reading.integrated_j[0]
        print(f"{name:<40} {value:>10.1f} {value / counter:>10.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""What one migrated call costs on a device, op by op: why a per-call backend is slow there.

For each cv2 call below, runs its torch backend as a migrated call does (upload, the backend,
download) under ``torch.profiler`` and prints, per call: the wall time, the torch operators and
device kernels it ran, the host-device copies and the synchronizations (each one a full wait for
the device), then the operators that ran most often. On the CPU the same script counts operators
only. A call that launches hundreds of kernels or synchronizes a dozen times per image cannot beat
cv2 per call however fast the device is; batching amortizes exactly these counts.

    python benchmarks/call_anatomy.py [--device cuda:0] [--calls 20] [--size 128]
"""

from __future__ import annotations

import argparse
import time
from collections import Counter
from collections.abc import Callable
from typing import Any

import cv2
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile

from codedag.backends.probe import migrated_call

SYNC_EVENTS = ("cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize")


def cases(size: int) -> list[tuple[str, tuple[Any, ...], dict[str, Any]]]:
    """The calls of the example image pipelines, on one ``size`` x ``size`` BGR image."""
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, (size, size, 3), dtype=np.uint8)
    matrix = cv2.getRotationMatrix2D((size / 2, size / 2), 10.0, 1.05)
    return [
        ("cv2.cvtColor", (image, cv2.COLOR_BGR2RGB), {}),
        ("cv2.flip", (image, 1), {}),
        ("cv2.resize", (image, (size // 2, size // 2)), {"interpolation": cv2.INTER_LINEAR}),
        ("cv2.GaussianBlur", (image, (3, 3), 0), {}),
        ("cv2.warpAffine", (image, matrix, (size, size)), {"borderMode": cv2.BORDER_REFLECT_101}),
    ]


def anatomy(call: Callable[..., Any], args: tuple, kwargs: dict, calls: int, cuda: bool) -> dict:
    """Profile ``calls`` calls after a warm-up; counts per call and the most frequent ops."""
    for _ in range(3):
        call(*args, **kwargs)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        start = time.perf_counter()
        for _ in range(calls):
            call(*args, **kwargs)
        wall = time.perf_counter() - start
    ops: Counter[str] = Counter()
    kernels = copies = syncs = 0
    for event in prof.events():
        name = event.name
        if event.device_type == torch.autograd.DeviceType.CUDA:
            if name.startswith("Memcpy"):
                copies += 1
            else:
                kernels += 1
        elif name.startswith("aten::"):
            ops[name] += 1
        elif name in SYNC_EVENTS:
            syncs += 1
    return {
        "us": wall / calls * 1e6,
        "ops": sum(ops.values()) / calls,
        "kernels": kernels / calls,
        "copies": copies / calls,
        "syncs": syncs / calls,
        "top": [(n, c / calls) for n, c in ops.most_common(6)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--size", type=int, default=128)
    args = parser.parse_args()
    cuda = args.device.startswith("cuda")
    print(f"device {args.device}, {args.size}x{args.size}x3 uint8; figures per call")
    print(
        f"{'call':18} {'us':>8} {'aten ops':>9} {'kernels':>8} {'copies':>7} {'syncs':>6}  top ops"
    )
    for name, call_args, kwargs in cases(args.size):
        row = anatomy(migrated_call(name, args.device), call_args, kwargs, args.calls, cuda)
        top = ", ".join(f"{n.removeprefix('aten::')} {c:.0f}" for n, c in row["top"])
        print(
            f"{name:18} {row['us']:8.0f} {row['ops']:9.0f} {row['kernels']:8.0f} "
            f"{row['copies']:7.1f} {row['syncs']:6.1f}  {top}"
        )


if __name__ == "__main__":
    main()

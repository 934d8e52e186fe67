"""What one migrated call costs on a device, op by op: why a per-call backend is slow there.

For each cv2 call below, runs its torch backend as a migrated call does (upload, the backend,
download) under ``torch.profiler`` and prints, per call: the wall time, the torch operators and
device kernels it ran, the host-device copies and the synchronizations (each one a full wait for
the device), then the operators that ran most often. On the CPU the same script counts operators
only. A call that launches hundreds of kernels or synchronizes a dozen times per image cannot beat
cv2 per call however fast the device is; batching amortizes exactly these counts.

Beside each call it prints the floor measured in the same run: what no per-call design avoids,
a bare round trip of the call's own bytes (its input up, from pinned memory, and its result
back, into pinned memory) plus one trivial op on the device, synchronized per call as the
migrated call is; on the CPU a bare copy of the same bytes each way and the same op.

    python benchmarks/call_anatomy.py [--device cuda:0] [--calls 20] [--size 128] [--json rows.json]
"""

from __future__ import annotations

import argparse
import functools
import json
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


def floor_call(in_bytes: int, out_bytes: int, device: str) -> Callable[[], None]:
    """One call's floor: ``in_bytes`` up, one trivial op, ``out_bytes`` back, synchronized."""
    cuda = device.startswith("cuda")
    host_in = torch.ones(in_bytes, dtype=torch.uint8, pin_memory=cuda)
    host_out = torch.empty(out_bytes, dtype=torch.uint8, pin_memory=cuda)
    device_out = torch.zeros(out_bytes, dtype=torch.uint8, device=device)

    def call() -> None:
        moved = host_in.to(device, non_blocking=True) if cuda else host_in.clone()
        moved.add_(1)  # the trivial op
        host_out.copy_(device_out, non_blocking=cuda)
        if cuda:
            torch.cuda.synchronize(device)

    return call


def wall_us(call: Callable[[], Any], calls: int) -> float:
    """Wall time per call of ``call`` after a warm-up (the best of three runs of ``calls``)."""
    for _ in range(3):
        call()
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(calls):
            call()
        best = min(best, time.perf_counter() - start)
    return best / calls * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--size", type=int, default=128)
    parser.add_argument("--json", default=None, help="also write the rows here")
    args = parser.parse_args()
    cuda = args.device.startswith("cuda")
    print(f"device {args.device}, {args.size}x{args.size}x3 uint8; figures per call")
    print(
        f"{'call':18} {'us':>8} {'floor us':>9} {'x floor':>8} {'aten ops':>9} {'kernels':>8} "
        f"{'copies':>7} {'syncs':>6}  top ops"
    )
    rows = []
    for name, call_args, kwargs in cases(args.size):
        call = migrated_call(name, args.device)
        row = anatomy(call, call_args, kwargs, args.calls, cuda)
        result = np.asarray(getattr(cv2, name.split(".")[1])(*call_args, **kwargs))
        # both timed the same way, outside the profiler
        wall = wall_us(functools.partial(call, *call_args, **kwargs), args.calls)
        floor = wall_us(floor_call(call_args[0].nbytes, result.nbytes, args.device), args.calls)
        top = ", ".join(f"{n.removeprefix('aten::')} {c:.0f}" for n, c in row["top"])
        print(
            f"{name:18} {wall:8.0f} {floor:9.1f} {wall / floor:8.1f} "
            f"{row['ops']:9.0f} {row['kernels']:8.0f} {row['copies']:7.1f} {row['syncs']:6.1f}  "
            f"{top}"
        )
        rows.append(
            {"call": name, "us": wall, "floor_us": floor, "x_floor": wall / floor}
            | {k: row[k] for k in ("ops", "kernels", "copies", "syncs")}
        )
    print(
        "us: a call unprofiled (best of 3 runs); floor: the call's input bytes up and result bytes back"
        + (" through pinned memory" if cuda else " (bare copies)")
        + " plus one trivial op, synchronized per call, in this run"
    )
    if args.json:
        document = {"device": args.device, "size": args.size, "rows": rows}
        with open(args.json, "w") as out:
            json.dump(document, out, indent=1)


if __name__ == "__main__":
    main()

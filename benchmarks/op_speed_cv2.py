"""Speed of the cv2 torch backends against cv2: per op, batch of 1 and of 64, 224x224 and 512x512.

For each op the same uint8 BGR images (float32 where the op is used on floats) go through cv2 one
image at a time (what a Dataset's __getitem__ does) and through the codedag backend as one batch on
torch's CPU, and on the GPU when CUDA is present (data already on the device; CUDA-event timing).
Prints median times per batch and the ratios cv2 / backend side by side (> 1: the backend is
faster). Images are random, so data-dependent ops (medianBlur, equalizeHist) see their worst case.

    .venv/bin/python benchmarks/op_speed_cv2.py [--sizes 224 512] [--batches 1 64] [--ops resize]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass

import cv2
import numpy as np
import torch

from codedag.backends.ops.cv2 import BACKENDS as B

M_AFFINE = cv2.getRotationMatrix2D((100.0, 100.0), 17.0, 1.1)
M_PERSP = np.vstack([M_AFFINE, [1e-4, -2e-4, 1.0]])
KERNEL = np.random.default_rng(0).normal(size=(5, 5)).astype(np.float32)
LUT_TABLE = np.random.default_rng(1).integers(0, 256, 256).astype(np.uint8)


@dataclass(frozen=True)
class Case:
    """One op: how cv2 runs it on one image, how the backend runs it on a batch tensor."""

    name: str
    ref: Callable[[np.ndarray], object]
    ours: Callable[[torch.Tensor], object]
    gray: bool = False
    float_input: bool = False


def _cases(size: int) -> list[Case]:
    half = (size // 2, size // 2)
    lut = torch.from_numpy(LUT_TABLE)
    return [
        Case(
            "resize linear /2", lambda im: cv2.resize(im, half), lambda t: B["cv2.resize"](t, half)
        ),
        Case(
            "resize linear 224->x1.37",
            lambda im: cv2.resize(im, (int(size * 1.37), int(size * 1.37))),
            lambda t: B["cv2.resize"](t, (int(size * 1.37), int(size * 1.37))),
        ),
        Case(
            "resize area /3",
            lambda im: cv2.resize(im, (size // 3, size // 3), interpolation=cv2.INTER_AREA),
            lambda t: B["cv2.resize"](t, (size // 3, size // 3), interpolation=cv2.INTER_AREA),
        ),
        Case(
            "resize cubic /2",
            lambda im: cv2.resize(im, half, interpolation=cv2.INTER_CUBIC),
            lambda t: B["cv2.resize"](t, half, interpolation=cv2.INTER_CUBIC),
        ),
        Case(
            "cvtColor BGR2RGB",
            lambda im: cv2.cvtColor(im, cv2.COLOR_BGR2RGB),
            lambda t: B["cv2.cvtColor"](t, cv2.COLOR_BGR2RGB),
        ),
        Case(
            "cvtColor BGR2GRAY",
            lambda im: cv2.cvtColor(im, cv2.COLOR_BGR2GRAY),
            lambda t: B["cv2.cvtColor"](t, cv2.COLOR_BGR2GRAY),
        ),
        Case(
            "cvtColor BGR2HSV",
            lambda im: cv2.cvtColor(im, cv2.COLOR_BGR2HSV),
            lambda t: B["cv2.cvtColor"](t, cv2.COLOR_BGR2HSV),
        ),
        Case("flip", lambda im: cv2.flip(im, 1), lambda t: B["cv2.flip"](t, 1)),
        Case("rotate 90", lambda im: cv2.rotate(im, 0), lambda t: B["cv2.rotate"](t, 0)),
        Case(
            "warpAffine linear",
            lambda im: cv2.warpAffine(im, M_AFFINE, (size, size)),
            lambda t: B["cv2.warpAffine"](t, M_AFFINE, (size, size)),
        ),
        Case(
            "warpPerspective linear",
            lambda im: cv2.warpPerspective(im, M_PERSP, (size, size)),
            lambda t: B["cv2.warpPerspective"](t, M_PERSP, (size, size)),
        ),
        Case(
            "GaussianBlur 5x5",
            lambda im: cv2.GaussianBlur(im, (5, 5), 0),
            lambda t: B["cv2.GaussianBlur"](t, (5, 5), 0),
        ),
        Case("blur 3x3", lambda im: cv2.blur(im, (3, 3)), lambda t: B["cv2.blur"](t, (3, 3))),
        Case(
            "medianBlur 3",
            lambda im: cv2.medianBlur(im, 3),
            lambda t: B["cv2.medianBlur"](t, 3),
        ),
        Case(
            "filter2D 5x5 float",
            lambda im: cv2.filter2D(im, -1, KERNEL),
            lambda t: B["cv2.filter2D"](t, -1, KERNEL),
            float_input=True,
        ),
        Case(
            "Sobel dx float",
            lambda im: cv2.Sobel(im, cv2.CV_32F, 1, 0),
            lambda t: B["cv2.Sobel"](t, cv2.CV_32F, 1, 0),
            float_input=True,
        ),
        Case(
            "copyMakeBorder 16 r101",
            lambda im: cv2.copyMakeBorder(im, 16, 16, 16, 16, cv2.BORDER_REFLECT_101),
            lambda t: B["cv2.copyMakeBorder"](t, 16, 16, 16, 16, cv2.BORDER_REFLECT_101),
        ),
        Case(
            "normalize minmax ->f32",
            lambda im: cv2.normalize(im, None, 0, 1, cv2.NORM_MINMAX, cv2.CV_32F),
            lambda t: B["cv2.normalize"](t, None, 0, 1, cv2.NORM_MINMAX, cv2.CV_32F),
        ),
        Case(
            "convertScaleAbs",
            lambda im: cv2.convertScaleAbs(im, alpha=1.2, beta=10),
            lambda t: B["cv2.convertScaleAbs"](t, alpha=1.2, beta=10),
        ),
        Case(
            "addWeighted",
            lambda im: cv2.addWeighted(im, 0.7, im, 0.3, 5),
            lambda t: B["cv2.addWeighted"](t, 0.7, t, 0.3, 5),
        ),
        Case("add scalar", lambda im: cv2.add(im, 20), lambda t: B["cv2.add"](t, 20)),
        Case("LUT", lambda im: cv2.LUT(im, LUT_TABLE), lambda t: B["cv2.LUT"](t, lut)),
        Case(
            "threshold binary",
            lambda im: cv2.threshold(im, 127, 255, 0),
            lambda t: B["cv2.threshold"](t, 127, 255, 0),
            gray=True,
        ),
        Case(
            "threshold otsu",
            lambda im: cv2.threshold(im, 0, 255, cv2.THRESH_OTSU),
            lambda t: B["cv2.threshold"](t, 0, 255, cv2.THRESH_OTSU),
            gray=True,
        ),
        Case("equalizeHist", cv2.equalizeHist, lambda t: B["cv2.equalizeHist"](t), gray=True),
    ]


def _median_s(fn: Callable[[], object], sync: Callable[[], None], budget_s: float) -> float:
    fn()
    sync()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < budget_s and len(times) < 20):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def _cuda_median_s(fn: Callable[[], object], budget_s: float) -> float:
    fn()
    torch.cuda.synchronize()
    times: list[float] = []
    start = time.perf_counter()
    while len(times) < 3 or (time.perf_counter() - start < budget_s and len(times) < 50):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        torch.cuda.synchronize()
        times.append(begin.elapsed_time(end) / 1000.0)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[224, 512])
    parser.add_argument("--batches", type=int, nargs="+", default=[1, 64])
    parser.add_argument("--ops", default="", help="comma-separated substrings of op names")
    parser.add_argument("--budget-s", type=float, default=0.5, help="time per measurement")
    parser.add_argument("--json", default="", help="also write the rows to this JSON file")
    args = parser.parse_args()
    cuda = torch.cuda.is_available()
    rng = np.random.default_rng(0)
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} CPU threads, cv2 {cv2.__version__}"
    )
    gpu_name = torch.cuda.get_device_name() if cuda else "none"
    print(f"cv2 threads {cv2.getNumThreads()}; CUDA: {gpu_name}")
    head = f"{'op':26} {'size':>5} {'N':>3} {'cv2 ms':>9} {'torch-cpu ms':>12} {'cpu x':>6}"
    print(head + (f" {'cuda ms':>9} {'cuda x':>7}" if cuda else ""))
    rows = []
    wanted = [w for w in args.ops.split(",") if w]
    for size in args.sizes:
        for case in _cases(size):
            if wanted and not any(w in case.name for w in wanted):
                continue
            for n in args.batches:
                shape = (n, size, size) if case.gray else (n, size, size, 3)
                batch = rng.integers(0, 256, shape).astype(np.uint8)
                if case.float_input:
                    batch = batch.astype(np.float32)
                images = list(batch)
                cpu_t = torch.from_numpy(batch)
                ref_s = _median_s(
                    lambda im=images, c=case: [c.ref(i) for i in im], lambda: None, args.budget_s
                )
                cpu_s = _median_s(lambda t=cpu_t, c=case: c.ours(t), lambda: None, args.budget_s)
                row = {
                    "op": case.name,
                    "size": size,
                    "batch": n,
                    "cv2_s": ref_s,
                    "torch_cpu_s": cpu_s,
                }
                line = (
                    f"{case.name:26} {size:>5} {n:>3} {ref_s * 1e3:>9.2f} {cpu_s * 1e3:>12.2f} "
                    f"{ref_s / cpu_s:>6.2f}"
                )
                if cuda:
                    gpu_t = cpu_t.cuda()
                    gpu_s = _cuda_median_s(lambda t=gpu_t, c=case: c.ours(t), args.budget_s)
                    row["cuda_s"] = gpu_s
                    line += f" {gpu_s * 1e3:>9.3f} {ref_s / gpu_s:>7.1f}"
                rows.append(row)
                print(line, flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "cuda": cuda}, f, indent=1)


if __name__ == "__main__":
    main()

"""A Kaggle-sized box: the pipeline's own loader at its best worker count against the whole plan.

The process is pinned to ``--cpus`` CPUs (default 4, ``os.sched_setaffinity``) before any
DataLoader starts, so its workers inherit the limit; the output says how many CPUs it actually
got (fewer where the machine has fewer). Then, for each pipeline (``letterbox``, ``demo_image``,
``yolo_mosaic`` and ``audio_files``, the audio pipeline that reads its WAV files with
``librosa.load``), ``--epochs`` epochs are loaded (the same seeds, sample order and random draws
as ``benchmarks/whole_plan.py``; every batch moved to the device as a training loop moves it):

* ``own``: the pipeline's own DataLoader at each worker count of a small set (0, 2, 4, ... up to
  the CPUs; ``--quick``: 0 and 2), and the best of them (the most samples/s over all epochs);
* ``plan``: codedag's whole plan for that worker count, built and applied as ``whole_plan.py``
  does it (``prepare`` and ``run_plan``): the loader settings tuned on this box, the prefix
  cache, the lookup tables, and placement and batched chains on ``--device`` where calibration
  measured them faster, their batches delivered on the device once the loop moves them there.

Printed per pipeline: samples/s of epoch 1 and of epochs 2+ for both, plan / best own side by
side, the GPU's busy share during each (NVML utilization sampled as codedag's monitor samples
it; ``n/a`` without CUDA or NVML), and whether every batch of the plan equals the pipeline's own
(``bit``: bit for bit; ``tol``: within the tolerance of the demo's equivalence check, the largest
difference printed; compared with the plan's loader settings where the plan changes them, as
``whole_plan.py`` does). One run each, no rounds: it measures and prints ratios, never asserts
them. Run::

    python benchmarks/gpu_box.py [--device cuda|cpu] [--cpus 4] [--samples 256] [--epochs 3]
        [--quick] [--pipelines letterbox demo_image ...] [--out box.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

import torch
from common import compare_batches, host_copy
from whole_plan import (
    Case,
    _threads,
    loader_line,
    loader_maker,
    prepare,
    reference_digests,
    run_epochs,
    run_plan,
)

from codedag.errors import ConfigError
from codedag.experiments.demo_data import IMAGENET_STD

PIPELINES = ("letterbox", "demo_image", "yolo_mosaic", "audio_files")
QUICK_SIZES: dict[str, dict[str, Any]] = {
    "letterbox": {"img_size": 160, "min_size": 128, "max_size": 224},
    "demo_image": {"image_size": 64, "source_size": 128},
    "yolo_mosaic": {"img_size": 160},
    "audio_files": {"duration_s": 2.0, "min_seconds": 1.0, "max_seconds": 3.0},
}
"""Each pipeline's sizes with ``--quick`` (on the CPU and on a device alike)."""

IMAGE_TOLERANCE = 2.0 / 255.0 / float(IMAGENET_STD.min())
TOLERANCE = {
    "letterbox": IMAGE_TOLERANCE,
    "demo_image": IMAGE_TOLERANCE,
    "yolo_mosaic": 2.0,
    "audio_files": 1e-3,
}
"""The demo's equivalence tolerances: two uint8 levels (after normalization for float images),
1e-3 for audio."""


@contextlib.contextmanager
def limit_cpus(count: int) -> Iterator[list[int]]:
    """Pin this process, and the DataLoader workers it forks while entered, to the first
    ``count`` CPUs it may use; yields the CPUs it may use then (fewer than ``count`` where it
    had fewer). The affinity it had is restored on exit."""
    allowed = os.sched_getaffinity(0)
    os.sched_setaffinity(0, sorted(allowed)[:count])
    try:
        yield sorted(os.sched_getaffinity(0))
    finally:
        os.sched_setaffinity(0, allowed)


def worker_counts(cpus: int, quick: bool) -> list[int]:
    """0, then 2, 4, 8, ... up to ``cpus``; ``quick``: 0 and the next one only."""
    counts, workers = [0], 2
    while workers <= cpus:
        counts.append(workers)
        workers *= 2
    return counts[:2] if quick else counts


class GpuOnlyProbe:
    """A probe for codedag's resource monitor that reads the GPUs only (through NVML)."""

    def __init__(self, gpus: Any) -> None:
        self.gpus = gpus

    def sample(self) -> Any:
        """One reading of every visible GPU."""
        from codedag.monitor.probes import ResourceSample, gpu_reading

        return ResourceSample(time.time(), gpus=[gpu_reading(s) for s in self.gpus.sample()])

    def describe(self) -> dict[str, Any]:
        """Where the readings come from."""
        return {"gpu_source": self.gpus.source, "gpu_reason": self.gpus.reason}

    def close(self) -> None:
        """Release NVML."""
        self.gpus.close()


@contextlib.contextmanager
def gpu_busy(
    device: str, interval_s: float = 0.1, nvml: Any | None = None
) -> Iterator[dict[str, float | None]]:
    """The device's busy share, its mean NVML utilization while entered (``share`` in the dict
    yielded, filled on exit; ``None`` without CUDA or NVML), sampled by codedag's
    :class:`~codedag.monitor.resources.ResourceMonitor` every ``interval_s`` (``nvml``: the
    NVML module, ``pynvml`` by default)."""
    out: dict[str, float | None] = {"share": None}
    if torch.device(device).type != "cuda":
        yield out
        return
    from codedag.devices.gpus import open_gpus
    from codedag.monitor.resources import ResourceMonitor

    gpus = open_gpus(nvml)
    if not gpus.count():
        gpus.close()
        yield out
        return
    monitor = ResourceMonitor(interval_s, probe=GpuOnlyProbe(gpus))
    monitor.start()
    try:
        yield out
    finally:
        monitor.stop()
        gpus.close()
        index = torch.device(device).index or 0
        series = monitor.summary()["series"]
        usage = series.get(f"gpu_usage/{index}") or next(
            (v for k, v in series.items() if k.startswith("gpu_usage/")), None
        )
        out["share"] = usage["mean"] / 100.0 if usage else None


def _later(rates: list[float]) -> float:
    return statistics.fmean(rates[1:]) if len(rates) > 1 else rates[0]


def _overall(rates: list[float]) -> float:
    """Samples/s over all epochs (each epoch has the same samples)."""
    return len(rates) / sum(1 / r for r in rates)


def best_own(
    name: str, counts: list[int], args: argparse.Namespace, options: dict[str, Any]
) -> tuple[int, dict[int, dict[str, Any]]]:
    """The pipeline's own loader at each worker count: the best count and every count's figures
    (samples/s of each epoch, GPU busy share)."""
    tried: dict[int, dict[str, Any]] = {}
    for workers in counts:
        make = loader_maker(name, workers, args.samples, args.batch_size, options)
        with gpu_busy(args.device) as busy:
            rates, _, _ = run_epochs(make, args.epochs, device=args.device)
        tried[workers] = {"rates": rates, "gpu_busy": busy["share"]}
        print(
            f"  own {workers} workers: epoch 1 {rates[0]:.1f}, epochs 2+ {_later(rates):.1f} "
            "samples/s",
            flush=True,
        )
    best = max(tried, key=lambda w: _overall(tried[w]["rates"]))
    return best, tried


def compare_plan(case: Case, plan_digests: list[list[bytes]], epochs: int) -> dict[str, Any]:
    """Whether every batch of the plan equals the pipeline's own (loaded with the plan's loader
    settings where it changes them, as ``whole_plan.py`` compares): bit for bit by digest; else
    both loaded once more, each batch of the plan against the pipeline's batch kept on the host,
    its first leaf (the images, the spectrograms) within the tolerance, the rest exactly."""
    against = "settings" if case.plan.get("loader") else "own"
    tolerance = TOLERANCE.get(case.name, 0.0)
    row = {"same": "bit", "same_against": against, "max_abs_diff": 0.0, "tolerance": tolerance}
    if reference_digests(case, epochs) == plan_digests:
        return row
    kept: list[Any] = []
    reference_digests(case, epochs, on_batch=lambda b: kept.append(host_copy(b)))
    batches = iter(kept)
    worst, equal, compared = 0.0, True, 0

    def check(batch: Any) -> None:
        nonlocal worst, equal, compared
        expected = next(batches, None)
        compared += 1
        if expected is None:
            equal = False
            return
        result = compare_batches([expected], [host_copy(batch)])
        worst = max(worst, result.max_abs_diff)
        for path, diff in result.differing.items():
            equal = equal and diff <= (tolerance if path == "[0]" else 0.0)

    run_plan(case, epochs, on_batch=check)
    row.update(same="tol" if equal and compared == len(kept) else "NO", max_abs_diff=worst)
    return row


def _plan_line(case: Case) -> str:
    """What the plan does beyond the loader, in words."""
    plan = case.plan
    placed = len(plan.get("context_device_map") or {})
    chains = [c for c in (plan.get("batched") or {}).get("chains", []) if c.get("batched")]
    cache = [c for c in (plan.get("cache") or {}).get("chains", []) if c.get("cached")]
    cut = ", ".join(c["cut"]["step"].rsplit(".", 1)[-1] for c in cache) or "none"
    tables = (plan.get("tables") or {}).get("runs") or []
    return (
        f"plan on {case.device}: {placed} calls placed, {len(chains)} chains batched, cache cut "
        f"at {cut}, {len(tables)} lookup-table runs"
    )


def bench_pipeline(name: str, args: argparse.Namespace, counts: list[int]) -> dict[str, Any]:
    """One pipeline's row: its own loader at its best worker count against the whole plan."""
    options = dict(QUICK_SIZES.get(name, {})) if args.quick else {}
    best, tried = best_own(name, counts, args, options)
    case = prepare(
        name, best, args.samples, args.batch_size, True, None, options, device=args.device
    )
    with gpu_busy(args.device) as busy:
        plan = run_plan(case, args.epochs)
    own = tried[best]["rates"]
    row: dict[str, Any] = {
        "pipeline": name,
        "device": args.device,
        "workers_tried": {str(w): t["rates"] for w, t in tried.items()},
        "own_workers": best,
        "own_e1": own[0],
        "own_later": _later(own),
        "plan_e1": plan.rates[0],
        "plan_later": _later(plan.rates),
        "gpu_busy_own": tried[best]["gpu_busy"],
        "gpu_busy_plan": busy["share"],
        "loader": loader_line(plan.loader, case.plan.get("loader")),
        "plan": _plan_line(case),
    }
    row["e1_ratio"] = row["plan_e1"] / row["own_e1"]
    row["later_ratio"] = row["plan_later"] / row["own_later"]
    row.update(compare_plan(case, plan.digests, args.epochs))
    return row


HEADER = (
    f"{'pipeline':<12} {'own w':>5}  {'own e1':>7} {'plan e1':>7} {'x':>5}  {'own e2+':>7} "
    f"{'plan e2+':>8} {'x':>5}  {'GPU own':>7} {'GPU plan':>8}  same"
)


def _share(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.0%}"


def print_row(row: dict[str, Any]) -> None:
    """One row of the table, then the plan's and the loader's lines."""
    same = row["same"] + ("*" if row["same_against"] == "settings" else "")
    if row["same"] != "bit":
        same += f" (max |d| {row['max_abs_diff']:.3g}, tolerance {row['tolerance']:.3g})"
    print(
        f"{row['pipeline']:<12} {row['own_workers']:>5}  {row['own_e1']:7.1f} "
        f"{row['plan_e1']:7.1f} {row['e1_ratio']:5.2f}  {row['own_later']:7.1f} "
        f"{row['plan_later']:8.1f} {row['later_ratio']:5.2f}  {_share(row['gpu_busy_own']):>7} "
        f"{_share(row['gpu_busy_plan']):>8}  {same}",
        flush=True,
    )
    print(f"{'':<14}{row['plan']}", flush=True)
    print(f"{'':<14}{row['loader']}", flush=True)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda:0" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--cpus", type=int, default=4, help="CPUs of the box (default 4)")
    parser.add_argument("--samples", type=int, default=None, help="default 256; quick 32")
    parser.add_argument("--batch-size", type=int, default=None, help="default 16; quick 8")
    parser.add_argument("--epochs", type=int, default=None, help="default 3; quick 2")
    parser.add_argument("--quick", action="store_true", help="small sizes, fewer worker counts")
    parser.add_argument("--pipelines", nargs="+", default=list(PIPELINES), choices=PIPELINES)
    parser.add_argument("--torch-threads", type=int, default=1, help="0: torch's own")
    parser.add_argument("--out", default=None, help="write the rows as JSON here")
    return parser


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The options, checked (bad ones: one line and exit code 2)."""
    parser = _parser()
    args = parser.parse_args(argv)
    quick = args.quick
    if args.samples is None:
        args.samples = 32 if quick else 256
    if args.batch_size is None:
        args.batch_size = 8 if quick else 16
    if args.epochs is None:
        args.epochs = 2 if quick else 3
    for name in ("cpus", "samples", "batch_size", "epochs"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    try:
        device = torch.device(args.device)
    except RuntimeError:
        parser.error(f"--device must be cpu, cuda or cuda:N, got {args.device!r}")
    if device.type not in ("cpu", "cuda"):
        parser.error(f"--device must be cpu, cuda or cuda:N, got {args.device!r}")
    if device.type == "cuda" and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: CUDA is not available here")
    return args


def run(args: argparse.Namespace, echo: Callable[[str], None] = print) -> dict[str, Any]:
    """Limit the CPUs, then every pipeline's row; the rows, the box and the pipelines skipped."""
    with limit_cpus(args.cpus) as cpus, _threads(args.torch_threads):
        return _run(args, cpus, echo)


def _run(args: argparse.Namespace, cpus: list[int], echo: Callable[[str], None]) -> dict[str, Any]:
    counts = worker_counts(len(cpus), args.quick)
    echo(
        f"a box of {args.cpus} CPUs: {len(cpus)} available ({', '.join(map(str, cpus))}); "
        f"device {args.device}; {args.samples} samples, batches of {args.batch_size}, "
        f"{args.epochs} epochs, torch threads {args.torch_threads or 'default'}; own loader at "
        f"{', '.join(map(str, counts))} workers"
    )
    rows, skipped = [], {}
    for name in args.pipelines:
        echo(f"{name}:")
        started = time.perf_counter()
        try:
            rows.append(bench_pipeline(name, args, counts))
        except ConfigError as error:  # a pipeline that needs what is not installed
            skipped[name] = str(error)
            echo(f"  skipped: {error}")
            continue
        rows[-1]["seconds"] = time.perf_counter() - started
    return {
        "cpus_asked": args.cpus,
        "cpus": len(cpus),
        "device": args.device,
        "samples": args.samples,
        "batch_size": args.batch_size,
        "epochs": args.epochs,
        "rows": rows,
        "skipped": skipped,
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    result = run(args)
    print(
        f"\nsamples/s on {result['cpus']} CPUs; x: plan / own at its best worker count; GPU: "
        "the device's busy share (NVML utilization); same: every batch of the plan against "
        "the pipeline's own (* with the plan's loader settings)"
    )
    print(HEADER)
    for row in result["rows"]:
        print_row(row)
    for name, reason in result["skipped"].items():
        print(f"{name:<12} skipped: {reason}")
    if args.out:
        with open(args.out, "w", encoding="utf-8") as out:
            json.dump(result, out, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Per-sample time of each example pipeline, in the calling process and through DataLoader workers.

For every pipeline of ``codedag.experiments.pipelines`` at its default sizes: the time of
``dataset[i]`` in this process (after two warm-up samples, so librosa's lazy imports are not
counted), as median, mean and 95th percentile over ``--samples`` samples; then one epoch of the
same samples through a DataLoader without workers and with ``--workers`` workers, as samples per
second, and the ratio of the two side by side. cv2 keeps its default thread count.

    .venv/bin/python benchmarks/pipelines_per_sample.py [--samples 48] [--workers 2] [--only mel]
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

import numpy as np

from codedag.experiments import pipelines


def per_sample_ms(name: str, samples: int) -> list[float]:
    dataset = pipelines.make_dataset(name, n=samples, seed=0)
    np.random.seed(0)
    random.seed(0)
    for index in range(min(2, samples)):
        dataset[index]
    times = []
    for index in range(samples):
        start = time.perf_counter()
        dataset[index]
        times.append((time.perf_counter() - start) * 1e3)
    return times


def epoch_samples_per_s(name: str, samples: int, workers: int) -> float:
    loader = pipelines.make_loader(name, n=samples, batch_size=8, num_workers=workers)
    start = time.perf_counter()
    count = 0
    for images, _ in loader:
        count += len(images)
    return count / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=48)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--only", action="append", choices=pipelines.pipeline_names())
    args = parser.parse_args()
    header = (
        f"{'pipeline':<12} {'p50 ms':>8} {'mean ms':>8} {'p95 ms':>8} "
        f"{'0 workers/s':>12} {f'{args.workers} workers/s':>12} {'ratio':>6}"
    )
    print(header)
    for name in args.only or pipelines.pipeline_names():
        times = sorted(per_sample_ms(name, args.samples))
        p95 = times[min(len(times) - 1, int(0.95 * len(times)))]
        inline = epoch_samples_per_s(name, args.samples, 0)
        workers = epoch_samples_per_s(name, args.samples, args.workers)
        print(
            f"{name:<12} {statistics.median(times):8.2f} {statistics.fmean(times):8.2f} "
            f"{p95:8.2f} {inline:12.1f} {workers:12.1f} {workers / inline:6.2f}"
        )


if __name__ == "__main__":
    main()

"""Loader tuning on the demo and the example pipelines: tuned settings against the pipeline's own.

For each pipeline, in one run:

1. ``tune_loader`` measures the pipeline's DataLoader (as ``codedag tune`` does) and returns the
   plan's loader section;
2. the pipeline's DataLoader is built twice per round, as the program builds it and with the loader
   section applied (``LoaderSettingsPatch``, overriding the settings the pipeline passes
   explicitly, as ``codedag tune --override`` would), and both are timed in interleaved rounds
   (A B, B A, ...), fresh loaders each round, worker start-up excluded: batches per second at the
   median interval over whole cycles of the workers (with N workers batches arrive N at a time),
   the ratio and its standard error by :mod:`codedag.measure`;
3. the first batches of both are compared: identical for pipelines whose augmentation does not
   depend on which worker draws it; different where augmentation draws from each worker's random
   state (as any change of ``num_workers`` does: large differences), and by a unit in the last
   place where a float32 matrix product runs with another BLAS thread count.

Printed: the chosen settings, batches/s both ways, the ratio tuned / yours (the tuner keeps your
settings unless it measured better, so the ratio should not fall below ~0.97 beyond noise), the
start-up times, the tuning time. Nothing is asserted: it measures. Runs unchanged on CUDA (pinned
memory is then tuned too).

Usage::

    python benchmarks/loader_tune.py [--pipelines demo letterbox ...] [--batch-size 16]
        [--batches 12] [--rounds 3] [--step-ms MS] [--json out.json] [--log-trials]
"""

from __future__ import annotations

import argparse
import functools
import json
import logging
import math
import sys
import time
from collections.abc import Callable
from typing import Any

from common import compare_batches, run_round

from codedag.experiments import pipelines
from codedag.measure import round_order
from codedag.migrate.loader_settings import LoaderSettingsPatch
from codedag.plan import LoaderSection
from codedag.tune import TuneOptions, tune_loader
from codedag.tune.measure import run_trial
from codedag.tune.stats import MIN_SAMPLES, compare, median_s
from codedag.tune.variants import current_settings

DEFAULT_PIPELINES = (
    "demo",
    "demo_image",
    "demo_audio",
    "letterbox",
    "compose",
    "yolo_mosaic",
    "mel",
)


def _demo_loader(batch_size: int, samples: int, seed: int) -> Any:
    from codedag.experiments.demo_settings import DemoSettings
    from codedag.experiments.demo_steps import build_loader

    return build_loader(DemoSettings(batch_size=batch_size, samples=samples, seed=seed))


def factory(name: str, batch_size: int, samples: int, seed: int) -> Callable[[], Any]:
    """The pipeline's own DataLoader, as its code builds it (``num_workers=0`` by default)."""
    if name == "demo":
        return functools.partial(_demo_loader, batch_size, samples, seed)
    return functools.partial(
        pipelines.make_loader, name, batch_size=batch_size, seed=seed, n=samples
    )


def tuned_factory(make: Callable[[], Any], section: LoaderSection) -> Callable[[], Any]:
    """Build the DataLoader with the plan's loader section applied (explicit settings overridden)."""
    forced = section.model_copy(update={"override": list(section.changed)})
    patch = LoaderSettingsPatch(forced)

    def build() -> Any:
        patch.apply()
        try:
            return make()
        finally:
            patch.restore()

    return build


def side_by_side(
    variants: dict[str, Callable[[], Any]], batches: int, rounds: int
) -> dict[str, dict[str, Any]]:
    """Cycle intervals and start-ups of each variant over interleaved rounds (A B, B A, ...)."""
    out: dict[str, dict[str, Any]] = {
        name: {"intervals": [], "startup": [], "settings": None} for name in variants
    }
    for index in range(rounds):
        for name in round_order(list(variants), index):
            loader = variants[name]()
            settings = current_settings(loader)
            run = run_trial(
                lambda loader=loader: loader, settings, max_batches=batches, max_s=math.inf
            )
            out[name]["intervals"].extend(run.intervals_s)
            out[name]["startup"].append(run.startup_s)
            out[name]["settings"] = settings
    return out


def bench_one(name: str, args: argparse.Namespace) -> dict[str, Any]:
    """Tune one pipeline, then time its own settings against the tuned ones."""
    samples = args.batch_size * (args.batches + 8)
    make = factory(name, args.batch_size, samples, args.seed)
    started = time.perf_counter()
    section = tune_loader(
        make(),
        TuneOptions(
            batches=args.batches,
            rounds=args.rounds,
            step_s=None if args.step_ms is None else args.step_ms / 1e3,
        ),
    )
    tune_s = time.perf_counter() - started
    # Timed runs take whole cycles of the workers (run_trial): the data set must outlast them.
    workers = max(section.yours.num_workers, section.chosen.num_workers)
    needed = max(args.batches + 4, workers * (MIN_SAMPLES + 1)) + 4
    if needed * args.batch_size > samples:
        make = factory(name, args.batch_size, needed * args.batch_size, args.seed)
    tuned = tuned_factory(make, section)
    timed = side_by_side({"yours": make, "tuned": tuned}, args.batches + 4, args.rounds)
    yours, mine = timed["yours"]["intervals"], timed["tuned"]["intervals"]
    judged = compare(yours, mine)  # the rule of codedag.measure: medians and their spread
    _, kept_yours = run_round(make, args.compare_batches, keep=True)
    _, kept_tuned = run_round(tuned, args.compare_batches, keep=True)
    comparison = compare_batches(kept_yours, kept_tuned)
    return {
        "pipeline": name,
        "yours": section.yours.label(),
        "chosen": section.chosen.label(),
        "changed": section.changed,
        "reason": section.reason,
        "tune_s": tune_s,
        "trials": len(section.trials),
        "yours_batches_per_s": 1.0 / median_s(yours),
        "tuned_batches_per_s": 1.0 / median_s(mine),
        "ratio": judged.speedup,
        "ratio_stderr": judged.speedup_se,
        "yours_startup_ms": 1e3 * median_s(timed["yours"]["startup"]),
        "tuned_startup_ms": 1e3 * median_s(timed["tuned"]["startup"]),
        "outputs_identical": comparison.identical,
        "outputs_max_abs_diff": comparison.max_abs_diff,
        "cpu_limit": section.cpu_limit,
    }


def _outputs(row: dict[str, Any]) -> str:
    if row["outputs_identical"]:
        return "same"
    return f"max|d| {row['outputs_max_abs_diff']:.2g}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pipelines", nargs="+", default=list(DEFAULT_PIPELINES))
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--batches", type=int, default=12, help="batches per setting (12)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (3)")
    parser.add_argument("--step-ms", type=float, default=None, help="consumer step time")
    parser.add_argument("--compare-batches", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", default=None, help="also write the rows to this file")
    parser.add_argument(
        "--log-trials",
        action="store_true",
        help="log each setting the tuner times, as it ends, to stderr (with the time since start)",
    )
    args = parser.parse_args(argv)
    if args.log_trials:
        logging.basicConfig(format="%(relativeCreated)8.0f ms  %(message)s", stream=sys.stderr)
        logging.getLogger("codedag.tune").setLevel(logging.INFO)
    for name in args.pipelines:
        if name != "demo":
            pipelines.pipeline(name)  # unknown names fail before minutes of measuring

    print(
        "ratio = tuned / yours batches per second (steady state, start-up excluded), "
        "alternating rounds, fresh loaders"
    )
    header = (
        f"{'pipeline':<12} {'yours':<24} {'tuned':<34} {'yours b/s':>9} {'tuned b/s':>9} "
        f"{'ratio':>12} {'start-up ms':>13} {'tune s':>7} {'outputs':>14}"
    )
    print(header)
    rows = []
    for name in args.pipelines:
        row = bench_one(name, args)
        rows.append(row)
        print(
            f"{name:<12} {row['yours']:<24} {row['chosen']:<34} "
            f"{row['yours_batches_per_s']:>9.2f} {row['tuned_batches_per_s']:>9.2f} "
            f"{row['ratio']:>6.2f} ±{row['ratio_stderr']:>4.2f} "
            f"{row['yours_startup_ms']:>6.0f}/{row['tuned_startup_ms']:<6.0f} "
            f"{row['tune_s']:>7.1f} {_outputs(row):>14}",
            flush=True,
        )
    worst = min(r["ratio"] for r in rows)
    print(f"worst ratio {worst:.3f} (never worse than your settings: >= 0.97)")
    print(f"CPU limit {rows[0]['cpu_limit']:g}; reasons:")
    for row in rows:
        print(f"  {row['pipeline']}: {row['reason']}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump({"rows": rows}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())

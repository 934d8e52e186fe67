"""``codedag demo``: baseline vs optimized training on synthetic Kaggle-like data."""

from __future__ import annotations

import argparse
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codedag.cli.args import SEED, integer, nonempty_path
from codedag.cli.output import print_json, stdout_console
from codedag.errors import ConfigError

if TYPE_CHECKING:
    from codedag.experiments.demo_settings import BatchedSummary, CacheSummary

log = logging.getLogger(__name__)

# The demo generates every sample up front and keeps it in memory (encoded PNG images of about
# 140 KiB, or 5 s float32 clips of 625 KiB): the sample count is capped to stay near 3 GB.
SAMPLE_KIB = {"image": 142, "audio": 625}
MEMORY_CAP_MIB = 3072


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``demo`` subcommand."""
    parser = subparsers.add_parser(
        "demo",
        parents=[parent],
        help="run the whole experiment end to end on synthetic data (no download)",
        description=(
            "Baseline training with monitoring over two or more epochs, tracing one DataLoader "
            "batch, optimizing the DAG into a migration plan, training again with the plan "
            "applied (the prefix cache stores each sample's deterministic prefix in epoch 1 and "
            "reads it back from epoch 2), and checking that the migrated batches equal the "
            "baseline's. Each epoch's figures are shown apart. Writes results.json, plots, "
            "dag.svg, migration_plan.json and report.html into --out."
        ),
    )
    parser.add_argument("--task", default="image", help="image (cv2 + NumPy) or audio (librosa)")
    parser.add_argument(
        "--batches",
        type=integer(1, 10_000, "a demo, not a training run; use your own pipeline for more"),
        default=12,
        help="batches per mode, over every epoch (default 12)",
    )
    parser.add_argument(
        "--epochs",
        type=integer(1, 100, "a demo, not a training run"),
        default=2,
        help="passes over the data set, which holds batches / epochs batches (default 2)",
    )
    parser.add_argument(
        "--batch-size",
        type=integer(1, 1024, "a batch of 1024 128x128 images is 200 MB per copy"),
        default=32,
        help="samples per batch (default 32)",
    )
    parser.add_argument(
        "--workers",
        type=integer(0, 64, "each worker is a process with a copy of the data"),
        default=0,
        help="DataLoader workers (default 0)",
    )
    parser.add_argument(
        "--device", default=None, help="cpu, cuda or cuda:N (default: cuda if present)"
    )
    parser.add_argument(
        "--out", type=nonempty_path, default=Path("codedag-out"), help="output folder"
    )
    parser.add_argument("--seed", type=SEED, default=0, help="random seed (default 0)")
    parser.add_argument(
        "--no-tune",
        action="store_true",
        help="keep the DataLoader's settings (default: measure them, as `codedag tune` does)",
    )
    parser.add_argument(
        "--batched",
        choices=("auto", "always", "never"),
        default="auto",
        help="run sample chains batched where measured faster (auto), always, or never",
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="leave the prefix cache out of the plan (default: cache each sample's deterministic "
        "prefix where measured worth it)",
    )
    parser.add_argument(
        "--sink",
        action="append",
        default=[],
        metavar="NAME",
        help="also send the monitor's records to tensorboard (tensorboard:DIR) or mlflow "
        "(mlflow:TRACKING_URI); repeatable",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")
    parser.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    """Run the demo with a progress bar per stage and print the summary table."""
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TaskID,
        TextColumn,
        TimeElapsedColumn,
    )

    from codedag.experiments.demo import run_demo
    from codedag.experiments.demo_settings import DemoSettings
    from codedag.util.paths import check_output_dir

    settings = DemoSettings(
        task=args.task,
        batches=args.batches,
        epochs=args.epochs,
        batch_size=args.batch_size,
        workers=args.workers,
        device=args.device,
        out_dir=args.out,
        seed=args.seed,
        tune=not args.no_tune,
        batched=args.batched,
        cache=not args.no_cache,
        sinks=tuple(args.sink),
    )
    settings.validate()
    check_sample_count(settings.task, args.batches, args.batch_size, args.epochs)
    check_output_dir(args.out)
    console = Console(stderr=True)
    with Progress(
        TextColumn("{task.description:<22}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=False,
    ) as bar:
        tasks: dict[str, TaskID] = {}
        labels = {
            "baseline": "baseline training",
            "trace": "tracing one batch",
            "tune": "tuning the DataLoader",
            "optimize": "optimizing the DAG",
            "warm": "tuning the DataLoader, cache warm",
            "optimization": "optimized training",
            "check": "equivalence check",
            "report": "writing outputs",
        }

        def progress(stage: str, done: int, total: int) -> None:
            if stage not in tasks:
                tasks[stage] = bar.add_task(labels.get(stage, stage), total=total)
            bar.update(tasks[stage], completed=done, total=total)

        try:
            result = run_demo(settings, progress)
        except KeyboardInterrupt:
            results = Path(args.out) / "results.json"
            if results.is_file():
                log.warning("the batches measured before the interruption are in %s", results)
            raise
    if args.json:
        print_json(result.to_dict(), indent=2, default=str)
    else:
        print_summary(result)
    return 0 if result.equivalence.passed else 1


def check_sample_count(task: str, batches: int, batch_size: int, epochs: int = 1) -> None:
    """Refuse sample counts whose generated data would not fit the demo's memory budget (the
    data set holds one epoch: ``batches / epochs`` batches)."""
    kib = SAMPLE_KIB.get(task, max(SAMPLE_KIB.values()))
    limit = MEMORY_CAP_MIB * 1024 // kib
    per_epoch = -(-batches // epochs)
    samples = per_epoch * batch_size
    if samples > limit:
        spread = f" / --epochs {epochs}" if epochs > 1 else ""
        raise ConfigError(
            f"--batches {batches}{spread} x --batch-size {batch_size} = {samples} samples: the "
            f"{task} demo generates and holds every sample in memory (~{kib} KiB each), at most "
            f"{limit}; lower --batches or --batch-size, or raise --epochs"
        )


def placement_table(result: Any) -> Any:
    """The functions calibration measured: library vs torch time and where each one runs."""
    from rich.table import Table

    table = Table(title=f"measured on {result.device}: where each candidate runs")
    columns = ("function", "calls", "library ms (all)", "torch ms (all)", "speedup", "runs")
    for column in columns:
        table.add_column(column, justify="left" if column in ("function", "runs") else "right")
    for row in result.placement:
        placed = row.placed
        table.add_row(
            row.function,
            str(row.calls),
            f"{row.library_ns / 1e6:.2f}" if row.library_ns else "-",
            f"{row.torch_ns / 1e6:.2f}" if row.torch_ns else "-",
            "-" if row.speedup is None else f"{row.speedup:.2f}x",
            ("torch" if placed == row.calls else f"torch for {placed}")
            if placed
            else ("its library" if row.library_ns else f"its library: {row.reason}"),
            style="green" if placed else "",
        )
    return table


def print_batched(batched: BatchedSummary | None, console: Any) -> None:
    """Each sample chain's batched decision with its figures, and the run's batched stats."""
    if batched is None:
        return
    for chain in batched.chains:
        verdict = "runs batched" if chain.batched else "stays per sample"
        console.print(
            f"batched {chain.id} ({' > '.join(s.rsplit('.', 1)[-1] for s in chain.steps)}):"
            f" {verdict} [{chain.basis}]: {chain.reason}",
            markup=False,
        )
    stats = batched.stats
    if stats is not None:
        forced = ", ".join(f"{k} x{v}" for k, v in stats.forced.items()) or "none"
        console.print(
            f"batched execution on {stats.device}: {stats.batches} batches, "
            f"{stats.samples} samples, {stats.groups} groups, "
            f"{stats.backend_calls} backend calls, h2d {stats.h2d_bytes} B, "
            f"d2h {stats.d2h_bytes} B, worker {stats.worker_ms:.1f} ms, "
            f"main {stats.main_ms:.1f} ms, forced: {forced}",
            markup=False,
        )


def epoch_table(result: Any) -> Any:
    """Each epoch of each mode: samples/s, data-wait share and the ratio to the baseline's."""
    from rich.table import Table

    table = Table(title="per epoch (the prefix cache stores in epoch 1, reads back from epoch 2)")
    for column in ("mode", "epoch", "batches", "samples/s", "data wait", "vs baseline"):
        table.add_column(column, justify="left" if column == "mode" else "right", no_wrap=True)
    base = {e.epoch: e.samples_per_s for e in result.epochs if e.mode == "baseline"}
    for e in result.epochs:
        share = e.data_wait_s / e.seconds if e.seconds else 0.0
        ratio = e.samples_per_s / base[e.epoch] if base.get(e.epoch) else None
        table.add_row(
            e.mode,
            str(e.epoch),
            str(e.batches),
            f"{e.samples_per_s:.1f}",
            f"{100 * share:.1f} %",
            "-" if ratio is None or e.mode == "baseline" else f"{ratio:.2f}x",
        )
    return table


def print_cache(cache: CacheSummary | None, console: Any) -> None:
    """Each chain's cut with its figures, and the optimized run's hits and misses."""
    if cache is None:
        return
    for chain in cache.chains:
        steps = " > ".join(s.rsplit(".", 1)[-1] for s in chain.steps)
        if chain.cached:
            what = (
                f"cached after {chain.cut}: {chain.bytes_per_sample / 1e6:.3g} MB per "
                f"sample, saves {chain.saved_ms:.3g} ms per sample"
            )
        else:
            what = f"not cached: {chain.reason}"
        console.print(f"prefix cache {chain.id} ({steps}): {what}", markup=False)
    stats = cache.stats
    if stats is not None:
        misses = ", ".join(f"{k} {v}" for k, v in stats.misses.items()) or "none"
        stored = sum(stats.bytes.values())
        console.print(
            f"prefix cache run: {stats.hits} hits, misses: {misses}; "
            f"{stats.stored} values stored ({stored / 1e6:.3g} MB of a "
            f"{cache.budget_bytes / 1e6:.0f} MB budget), "
            f"{stats.not_stored_later} left for a later epoch, "
            f"{stats.evictions} evictions",
            markup=False,
        )
    tables = cache.tables
    if tables is not None:
        console.print(
            f"lookup tables ({', '.join(tables.producers)}): "
            f"{tables.runs} runs, {tables.gathered} gathered through a table, "
            f"{tables.computed} computed by their calls "
            f"({tables.mismatches} mismatches)",
            markup=False,
        )


def print_summary(result: Any) -> None:
    """The summary table, migrated calls, fallbacks, equivalence and output files."""
    from rich.markup import escape
    from rich.table import Table

    from codedag.migrate.stats import GuardSummary

    console = stdout_console(150)
    table = Table(title=f"codedag demo ({result.settings.task}) on {result.device}")
    for column in (
        "mode",
        "mean step s ± std",
        "batch p95 s",
        "data wait",
        "samples/s",
        "final loss",
    ):
        table.add_column(column, justify="right" if column != "mode" else "left", no_wrap=True)
    warm = sorted({m.warmup_batches for m in result.modes})
    if any(warm):
        table.caption = (
            f"the first {', '.join(map(str, warm))} batch(es) of each mode left out (warm-up)"
        )
    for m in result.modes:
        table.add_row(
            m.mode,
            f"{m.mean_step_s:.4f} ± {m.step_std_s:.4f}",
            f"{m.p95_batch_s:.4f}",
            f"{100 * m.data_wait_share:.1f} %",
            f"{m.throughput_samples_s:.1f}",
            "n/a" if m.final_loss is None else f"{m.final_loss:.4f}",
        )
    console.print(table)
    if result.epochs:
        console.print(epoch_table(result))
    if result.placement:
        console.print(placement_table(result))
    if result.loader is not None:
        from codedag.cli.tune import print_section

        print_section(result.loader, console)
    console.print(result.verdict)
    print_batched(result.batched, console)
    print_cache(result.cache, console)
    guard = result.guard
    if isinstance(guard, GuardSummary) and (guard.kept or guard.switched_off):
        kept = ", ".join(guard.kept) or "none"
        console.print(f"run-time check (first {guard.calls} calls both ways): kept {kept}")
        for name, why in guard.switched_off.items():
            console.print(f"run-time check switched off {name}: {why}", markup=False)
    migrated = {n: c for n, c in result.migrated_calls.items() if c}
    console.print(
        "migrated calls: " + (", ".join(f"{n} x{c}" for n, c in sorted(migrated.items())) or "none")
    )
    fallbacks = {n: c for n, c in result.fallbacks.items() if c}
    console.print("fallbacks: " + (", ".join(f"{n} x{c}" for n, c in fallbacks.items()) or "none"))
    eq = result.equivalence
    verdict = "[green]equal[/green]" if eq.passed else "[red]DIFFERENT[/red]"
    if eq.reason is not None:
        console.print(f"equivalence: {verdict} ({escape(eq.reason)})")
    else:
        console.print(
            f"equivalence: {verdict} (max |diff| {eq.max_abs_diff or 0.0:.5f}, "
            f"tolerance {eq.tolerance or 0.0:.5f}, {eq.batches_compared or 0} batches)"
        )
    for name, path in result.files.items():
        console.print(f"{name:>12}: {path}", markup=False)

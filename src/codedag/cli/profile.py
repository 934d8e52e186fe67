"""``codedag profile``: torch.profiler bottleneck scenarios and what bounds a training step."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from codedag.cli.args import SEED, integer, number
from codedag.cli.output import print_json

SCENARIO_CHOICES = ("dataloader", "sync", "tiny_ops", "memory_churn", "all")


def _flag(group: Any, name: str, **kwargs: Any) -> None:
    """Add ``--name`` with both the underscore and the dashed spelling."""
    spellings = [f"--{name}"]
    if "_" in name:
        spellings.append(f"--{name.replace('_', '-')}")
    group.add_argument(*spellings, dest=name, **kwargs)


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``profile`` subcommand."""
    p = subparsers.add_parser(
        "profile",
        parents=[parent],
        help="profile a training step with torch.profiler and say what bounds it",
        description=(
            "Run a controlled bottleneck scenario (or your own step with --target) under "
            "torch.profiler: data wait, step time (CUDA events), kernels/ops, synchronizations and "
            "allocations per step, top ops, a Chrome/Perfetto trace and a diagnosis "
            "(data-, sync-, launch-, allocation- or compute-bound) with the next step to take."
        ),
    )
    _what_flags(p)
    _data_flags(p)
    _profiling_flags(p)
    _output_flags(p)
    p.set_defaults(handler=run)


def _what_flags(p: argparse.ArgumentParser) -> None:
    """What to profile: a scenario or your own step, and the device."""
    what = p.add_argument_group("what to profile")
    _flag(
        what,
        "scenario",
        choices=SCENARIO_CHOICES,
        default=None,
        help="built-in scenario (default dataloader); 'all' runs the four and compares them",
    )
    _flag(
        what,
        "target",
        default=None,
        metavar="MODULE:FUNCTION",
        help="your own step: a zero-argument function returning step or (step, batches)",
    )
    _flag(
        what,
        "device",
        choices=("cuda", "cpu"),
        default="cuda",
        help="cuda (default; CPU + CUDA activities) or cpu (CPU activities only)",
    )


def _data_flags(p: argparse.ArgumentParser) -> None:
    """The scenarios' data, loader and model."""
    data = p.add_argument_group("data and model (scenarios)")
    _flag(data, "batch_size", type=integer(1, 65536), default=64, help="default 64")
    _flag(
        data,
        "image_size",
        type=integer(16, 8192, "one float32 RGB image of 8192 px is 800 MB"),
        default=224,
        help="image side in pixels, default 224",
    )
    _flag(
        data,
        "dataset_size",
        type=integer(1, 10_000_000),
        default=2048,
        help="synthetic samples, default 2048",
    )
    _flag(
        data,
        "num_workers",
        type=integer(0, 256, "each worker is a process"),
        default=2,
        help="DataLoader workers, default 2",
    )
    _flag(data, "pin_memory", action="store_true", help="pinned host batches (CUDA)")
    _flag(
        data,
        "persistent_workers",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="keep workers between epochs (default on; only with workers)",
    )
    _flag(
        data,
        "prefetch_factor",
        type=integer(1, 1024),
        default=2,
        help="batches per worker ahead, default 2",
    )
    _flag(
        data,
        "cpu_work",
        type=integer(0, 10**9),
        default=None,
        help="per-sample CPU work iterations (default: 4000 for dataloader, 200 otherwise)",
    )
    _flag(
        data,
        "io_sleep_ms",
        type=number(0, 60_000),
        default=None,
        help="per-sample simulated I/O in ms (default: 2 for dataloader, 0 otherwise)",
    )
    _flag(
        data, "amp", action="store_true", help="autocast (fp16 + GradScaler on CUDA, bf16 on CPU)"
    )
    _flag(data, "channels_last", action="store_true", help="NHWC model and inputs")
    _flag(
        data,
        "lr",
        type=number(above=0, max_value=100),
        default=1e-3,
        help="AdamW learning rate, default 1e-3",
    )
    _flag(data, "seed", type=SEED, default=0, help="random seed, default 0")


def _profiling_flags(p: argparse.ArgumentParser) -> None:
    """How many steps are warmed up, profiled and timed."""
    steps = p.add_argument_group("profiling")
    _flag(
        steps,
        "warmup_steps",
        type=integer(0, 1_000_000),
        default=10,
        help="steps before profiling, default 10",
    )
    _flag(
        steps,
        "profile_steps",
        type=integer(1, 100_000, "every profiled step is kept in memory"),
        default=8,
        help="profiled steps, default 8",
    )
    _flag(
        steps,
        "timed_steps",
        type=integer(0, 1_000_000),
        default=None,
        help="unprofiled timed steps after the profile (default: profile_steps)",
    )
    _flag(
        steps,
        "cpu_threads",
        type=integer(1, 4096),
        default=None,
        help="torch CPU threads for the run (default: torch's; 1 on a shared machine)",
    )
    _flag(steps, "with_stack", action="store_true", help="record Python stacks in the trace")
    _flag(
        steps,
        "row_limit",
        type=integer(1, 10_000),
        default=15,
        help="rows of the top-ops table, default 15",
    )


def _output_flags(p: argparse.ArgumentParser) -> None:
    """Where the trace and metrics go."""
    out = p.add_argument_group("outputs")
    _flag(
        out,
        "trace_dir",
        default="results/traces/profiler_demo",
        help="Chrome/Perfetto trace folder, default results/traces/profiler_demo",
    )
    _flag(
        out,
        "output_json",
        default="results/metrics_demo.json",
        help="metrics file, default results/metrics_demo.json ('' for none)",
    )
    _flag(
        out,
        "tensorboard",
        action="store_true",
        help="also write TensorBoard profiler-plugin files (deprecated plugin; optional)",
    )
    out.add_argument("--json", action="store_true", help="print the metrics JSON on stdout")


def _config(args: argparse.Namespace, scenario: str) -> Any:
    from codedag.profile.config import ProfileConfig

    return ProfileConfig(
        scenario=scenario,
        device=args.device,
        batch_size=args.batch_size,
        image_size_px=args.image_size,
        dataset_size=args.dataset_size,
        num_workers=args.num_workers,
        pin_memory=args.pin_memory,
        persistent_workers=args.persistent_workers,
        prefetch_factor=args.prefetch_factor,
        amp=args.amp,
        channels_last=args.channels_last,
        with_stack=args.with_stack,
        warmup_steps=args.warmup_steps,
        profile_steps=args.profile_steps,
        timed_steps=args.profile_steps if args.timed_steps is None else args.timed_steps,
        row_limit=args.row_limit,
        lr=args.lr,
        seed=args.seed,
        trace_dir=args.trace_dir,
        output_json=args.output_json,
        tensorboard=args.tensorboard,
        cpu_work=args.cpu_work,
        io_sleep_ms=args.io_sleep_ms,
        cpu_threads=args.cpu_threads,
    )


def run(args: argparse.Namespace) -> int:
    """Profile, print the tables and the diagnosis, write the JSON."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from codedag.devices.torch_devices import require_device
    from codedag.errors import UsageError
    from codedag.profile.api import profile_scenario, profile_target
    from codedag.util.io import atomic_write_json

    if args.target and args.scenario:
        raise UsageError("give either --scenario or --target, not both")
    scenarios = ["dataloader"] if not args.scenario else [args.scenario]
    if args.scenario == "all":
        scenarios = ["dataloader", "sync", "tiny_ops", "memory_churn"]
    if args.target:
        scenarios = ["target"]
        if "" not in sys.path and os.getcwd() not in sys.path:
            sys.path.insert(0, os.getcwd())  # as with `python -m`: the working folder imports
    require_device(args.device)
    from codedag.util.paths import check_output_dir, check_output_file

    if args.output_json:
        check_output_file(args.output_json, "--output_json")
    if args.trace_dir:
        check_output_dir(args.trace_dir, "--trace_dir")
    stream = sys.stderr if args.json else sys.stdout
    wide = None if stream.isatty() else 160  # piped output: no truncated columns
    out = Console(file=stream, highlight=False, width=wide)
    err = Console(file=sys.stderr)
    results = []
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        console=err,
        transient=True,
        disable=args.quiet or not err.is_terminal,
    ) as progress:
        for scenario in scenarios:
            config = _config(args, scenario)
            task = progress.add_task(scenario, total=None)

            def report(phase: str, done: int, total: int, task: Any = task, name: str = scenario):
                progress.update(task, description=f"{name}: {phase}", completed=done, total=total)

            if args.target:
                result = profile_target(args.target, config, report)
            else:
                result = profile_scenario(config, report)
            progress.remove_task(task)
            results.append(result)
            if not args.quiet:
                from codedag.cli._profile_render import print_result

                print_result(out, result)
    documents = [r.to_dict() for r in results]
    document: dict[str, Any] = documents[0] if len(documents) == 1 else {"runs": documents}
    if len(results) > 1 and not args.quiet:
        from codedag.cli._profile_render import print_comparison

        print_comparison(out, results)
    if args.output_json:
        path = atomic_write_json(args.output_json, document)
        out.print(f"metrics: {path}")
    if args.json:
        print_json(document, indent=2)
    return 0

"""``codedag tune``: measure a DataLoader's parallelism settings and write them into a plan."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from codedag.cli.args import check_loader_source, loader_source, nonempty_path
from codedag.cli.output import print_json, progress_bar, stdout_console
from codedag.errors import UsageError


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``tune`` subcommand."""
    p = subparsers.add_parser(
        "tune",
        parents=[parent],
        help="measure DataLoader settings (workers, threads, prefetch) and put them in the plan",
        description=(
            "Time batches/s and the consumer's wait of the pipeline's DataLoader for num_workers "
            "0 up to the CPUs this container may use, threads per worker for torch, OpenCV and "
            "BLAS, prefetch_factor, persistent_workers and (with a GPU) pin_memory; confirm the "
            "best against your own settings side by side, and write the choice with its figures "
            "into the plan's loader section (codedag migrate applies it)."
        ),
        epilog=(
            "examples: codedag tune --dataloader pkg.data:make_loader --step-ms 80; "
            "codedag tune train.py:loader --fix num_workers=4 --plan out/migration_plan.json"
        ),
    )
    loader_source(
        p,
        "path/to/script.py:function or package.module:function returning (or creating) the "
        "DataLoader",
        "a function returning a torch DataLoader",
    )
    p.add_argument(
        "--plan",
        type=nonempty_path,
        default=Path("migration_plan.json"),
        help="plan to write the loader section into: an existing plan keeps everything else "
        "(default: migration_plan.json)",
    )
    p.add_argument("--no-write", action="store_true", help="measure and print only")
    p.add_argument(
        "--no-warm",
        action="store_true",
        help="do not measure the settings for epochs the plan's prefix cache serves (measured "
        "by default when --plan caches a chain)",
    )
    _step_flags(p)
    _search_flags(p)
    p.set_defaults(handler=run)


def _step_flags(p: argparse.ArgumentParser) -> None:
    """What the loader must keep up with: a step time or the user's step."""
    step = p.add_argument_group("what the loader must keep up with (default: as fast as possible)")
    step.add_argument(
        "--step-ms", type=float, help="the training step's time per batch, data wait excluded"
    )
    step.add_argument(
        "--step-from",
        type=nonempty_path,
        metavar="RESULTS",
        help="take the step time from a monitored run's results.json (median batch time)",
    )
    step.add_argument("--step-mode", help="the mode of --step-from to read (default: baseline)")


def _search_flags(p: argparse.ArgumentParser) -> None:
    """What the search may try and how long it may take."""
    search = p.add_argument_group("search")
    search.add_argument(
        "--max-workers", type=int, help="largest num_workers tried (default: the CPU limit)"
    )
    search.add_argument(
        "--fix",
        nargs="+",
        default=[],
        metavar="KEY[=VALUE]",
        help="hold settings fixed: num_workers=4, threads=1, prefetch_factor=default, "
        "persistent_workers=false, pin_memory=true; a bare KEY keeps the DataLoader's value",
    )
    search.add_argument(
        "--override",
        nargs="+",
        default=[],
        metavar="KEY",
        help="settings the plan applies even where your code passes them explicitly",
    )
    search.add_argument(
        "--allow-changed-draws",
        action="store_true",
        help="apply the settings even where they change the random draws a sample gets "
        "(another worker count when samples draw random numbers); by default those are kept "
        "as your DataLoader sets them, so every batch stays the same",
    )
    search.add_argument(
        "--device",
        help="copy batches to this device while timing (default: cuda:0 if present; cpu: none)",
    )
    search.add_argument("--batches", type=int, default=12, help="batches per setting (12)")
    search.add_argument(
        "--trial-s", type=float, default=4.0, help="seconds per setting at most (4)"
    )
    search.add_argument(
        "--rounds", type=int, default=3, help="alternating rounds against your settings (3)"
    )
    search.add_argument(
        "--margin",
        type=float,
        default=5.0,
        metavar="PCT",
        help="change a setting only when it is faster by more than PCT %% and the noise (5)",
    )
    search.add_argument(
        "--budget-s", type=float, default=300.0, help="start no new setting after this long (300)"
    )
    p.add_argument("--json", action="store_true", help="print the loader section as JSON")


def find_loader(args: argparse.Namespace) -> Any:
    """The DataLoader that TARGET or ``--dataloader MODULE:FACTORY`` returns or creates."""
    from codedag.tune.capture import loader_from_factory
    from codedag.util.targets import load_target

    check_loader_source(args)
    if args.dataloader:
        return loader_from_factory(
            load_target(args.dataloader, what="--dataloader"), f"--dataloader {args.dataloader}"
        )
    return loader_from_factory(load_target(args.target), f"target {args.target}")


def _step(args: argparse.Namespace) -> tuple[float | None, str]:
    if args.step_ms is not None and args.step_from is not None:
        raise UsageError("give at most one of --step-ms and --step-from")
    if args.step_ms is not None:
        if not (0 < args.step_ms < math.inf):
            raise UsageError(f"--step-ms must be a positive number, got {args.step_ms}")
        return args.step_ms / 1e3, "--step-ms"
    if args.step_from is not None:
        from codedag.tune.consumer import step_from_results

        return step_from_results(args.step_from, args.step_mode)
    if args.step_mode is not None:
        raise UsageError("--step-mode needs --step-from RESULTS")
    return None, ""


_MAX_SECONDS = 7 * 24 * 3600.0  # a week: longer is a typo


def _check(args: argparse.Namespace) -> None:
    from codedag.tune.options import MAX_BATCHES, MAX_ROUNDS

    for name, most in (("batches", MAX_BATCHES), ("rounds", MAX_ROUNDS)):
        if not 1 <= getattr(args, name) <= most:
            raise UsageError(f"--{name} must be >= 1 and <= {most}, got {getattr(args, name)}")
    if args.max_workers is not None and args.max_workers < 0:
        raise UsageError(f"--max-workers must be >= 0, got {args.max_workers}")
    for name in ("trial_s", "budget_s"):
        value = getattr(args, name)
        if not (0 < value <= _MAX_SECONDS):
            raise UsageError(
                f"--{name.replace('_', '-')} must be a positive number of seconds up to "
                f"{_MAX_SECONDS:.0f} (a week), got {value}"
            )
    if not (0 <= args.margin < 100):
        raise UsageError(f"--margin must be a percentage in [0, 100), got {args.margin}")
    if args.device is not None:
        from codedag.devices.torch_devices import require_device

        args.device = require_device(args.device, "--device")


def loader_table(section: Any) -> Any:
    """Every measured setting: batches/s, interval, wait, start-up, worker memory, status."""
    from rich.table import Table
    from rich.text import Text

    from codedag.report.loader import TRIAL_COLUMNS, trial_cells

    title = f"DataLoader settings measured ({section.duration_s:.0f} s"
    if section.step_ms is not None:
        title += f", against a {section.step_ms:.1f} ms step"
    table = Table(title=title + ")")
    for column in (*TRIAL_COLUMNS, "workers MiB", "status"):
        table.add_column(
            column, justify="left" if column in ("phase", "setting", "status") else "right"
        )
    chosen, yours = section.chosen.model_dump(), section.yours.model_dump()
    for trial in section.trials:
        texts, tags = trial_cells(trial.model_dump(), chosen, yours)
        # Plain text: a tag such as "[chosen]" is not markup for rich to swallow.
        table.add_row(*map(Text, texts), style="bold green" if "chosen" in tags else "")
    table.caption = "workers MiB: unique / resident memory of all worker processes"
    return table


def print_section(section: Any, console: Any) -> None:
    """The table, the limits, the choice and its reason."""
    console.print(loader_table(section))
    console.print(
        f"CPU limit {section.cpu_limit:g} CPUs ({section.cpu_limit_source}): num_workers searched "
        f"0..{section.max_workers}"
        + (
            f"; memory limit {section.memory_limit_mb:.0f} MiB"
            if section.memory_limit_mb is not None
            else ""
        ),
        markup=False,
    )
    verdict = (
        "keeps your settings" if section.keeps_yours else "changes " + ", ".join(section.changed)
    )
    console.print(f"choice: {section.chosen.label()} ({verdict})", markup=False)
    console.print(f"reason: {section.reason}", markup=False)
    if section.warm is not None:
        console.print(f"epochs the prefix cache serves: {section.warm.reason}", markup=False)


def tune_options(args: argparse.Namespace) -> Any:
    """The :class:`~codedag.tune.TuneOptions` of ``tune``'s flags, checked against this
    machine before any worker starts.

    Raises:
        UsageError: a flag out of range, or a setting this machine's CPU limit does not justify.
    """
    from codedag.tune import TuneOptions, parse_fixed

    _check(args)
    options = TuneOptions(
        max_workers=args.max_workers,
        fixed=parse_fixed(args.fix),
        override=tuple(k.replace("-", "_") for k in args.override),
        allow_changed_draws=args.allow_changed_draws,
        device=args.device,
        batches=args.batches,
        trial_s=args.trial_s,
        rounds=args.rounds,
        margin_pct=args.margin,
        budget_s=args.budget_s,
    )
    options.validate()
    from codedag.devices.cgroups import container_cpus

    options.check_machine(*container_cpus())
    options.step_s, options.step_source = _step(args)
    return options


def measure(loader: Any, options: Any, warm_plan: Any | None = None) -> Any:
    """Tune ``loader`` under a progress bar on stderr; with ``warm_plan`` (a plan whose prefix
    cache caches a chain) also the settings for the epochs the cache serves.

    Returns:
        The plan's loader section (:class:`~codedag.plan.LoaderSection`).
    """
    from rich.console import Console

    from codedag.tune import tune_loader

    bar, update = progress_bar(Console(stderr=True), "tuning {task.description:<40}")
    options.progress = update
    with bar:
        section = tune_loader(loader, options)
        if warm_plan is not None and warm_plan.cache and warm_plan.cache.cached_chains:
            from codedag.tune.warm import tune_warm

            warm_plan.loader = section
            section.warm = tune_warm(loader, warm_plan, options)
    return section


def run(args: argparse.Namespace) -> int:
    """Find the DataLoader, tune it, print the table and write the plan."""
    from codedag.plan import read_plan
    from codedag.tune.tuner import plan_with_loader
    from codedag.util.io import atomic_write_json

    options = tune_options(args)
    existing = None
    if not args.no_write:
        from codedag.util.paths import check_output_file

        check_output_file(args.plan, "--plan")
    if not args.no_write and args.plan.exists():  # checked before minutes of measuring
        existing = read_plan(args.plan, source=f"plan {str(args.plan)!r}")
    loader = find_loader(args)
    section = measure(loader, options, None if args.no_warm else existing)
    written = None
    if not args.no_write:
        written = atomic_write_json(args.plan, plan_with_loader(existing, section).to_dict())
    if args.json:
        print_json(section.model_dump(mode="json"), indent=2)
    else:
        out = stdout_console()
        print_section(section, out)
        if written is not None:
            state = "updated" if existing is not None else "new plan"
            out.print(f"wrote the loader section into {written} ({state})", markup=False)
        from codedag.tune.capture import explicit_settings

        kept = section.kept_line(explicit_settings(loader))
        if kept is not None:
            out.print(kept, markup=False)
    return 0

"""``codedag run -- python train.py ...``: run a script unmodified and accelerate its DataLoader.

The script runs in this process (``runpy``, as ``python train.py`` runs it). The first DataLoader
it iterates (or ``--loader N``) is traced on one batch and planned after its first batch (0
workers) or its first epoch (workers), and the plan applies from then on (docs/run.md). At exit, whatever the script
did (return, ``sys.exit(code)``, an exception, Ctrl-C), everything is restored, a summary goes to
stderr and ``results.json`` and ``report.html`` to ``--out`` (``results.rank<R>.json`` and
``report.rank<R>.html`` under a launcher with several ranks, where rank 0 prints the summary);
the exit code is the script's.
"""

from __future__ import annotations

import argparse
import hashlib
import logging
import os
import sys
import time
from collections.abc import Mapping
from pathlib import Path

from codedag.cli.args import first_epoch_flag, integer, nonempty_path, number
from codedag.cli.migrate import add_script_command, rank_suffixed
from codedag.devices.distributed import distributed_rank, machine_launch_key
from codedag.integrations.run_results import RESULTS_FILE

log = logging.getLogger("codedag.cli")

DATA_DIR_ENV = "CODEDAG_DATA_DIR"


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``run`` subcommand."""
    p = subparsers.add_parser(
        "run",
        parents=[parent],
        help="run a training script unmodified and accelerate its DataLoader",
        description=(
            "Run a Python script (or -m module) in this process; trace and plan the DataLoader it "
            "iterates after its first batch (0 workers) or epoch and apply the plan. The batches are "
            "those the script gets without codedag; the exit code is the script's."
        ),
        epilog="example: codedag run -- python train.py --epochs 3",
    )
    p.add_argument(
        "--loader",
        type=integer(min_value=0, max_value=1_000_000),
        default=0,
        help="which DataLoader to plan, counted from 0 in the order of first iteration (0)",
    )
    p.add_argument(
        "--plan-budget-s",
        type=number(min_value=0, max_value=86_400),
        default=60.0,
        help="seconds tracing and planning may take; past it the script runs unmodified (60)",
    )
    p.add_argument(
        "--replan", action="store_true", help="plan again even if a plan is stored for this code"
    )
    p.add_argument(
        "--no-store", action="store_true", help="neither read nor keep plans across runs"
    )
    first_epoch_flag(p, "every value in the epoch that computes it, so the next reads each back")
    p.add_argument(
        "--out",
        type=nonempty_path,
        help="folder for results.json and report.html (default: a new folder under the user data dir's "
        "codedag/runs)",
    )
    add_script_command(p, "python SCRIPT [ARGS...] or python -m MODULE [ARGS...]")
    p.set_defaults(handler=run)


def default_out(environ: Mapping[str, str] | None = None) -> Path:
    """``$CODEDAG_DATA_DIR/runs/<timestamp>``, else under the platform's user data folder.

    The ranks of one distributed launch on this machine get one folder, named after the time
    the launcher started and the launch (:func:`~codedag.devices.distributed.machine_launch_key`),
    where each writes its own ``results.rank<R>.json``.
    """
    env = os.environ if environ is None else environ
    override = env.get(DATA_DIR_ENV, "").strip()
    if override:
        base = Path(override)
    else:
        import platformdirs

        base = Path(platformdirs.user_data_dir("codedag"))
    launch = machine_launch_key(env)
    if launch:
        digest = hashlib.sha256(launch.encode()).hexdigest()[:8]
        return base / "runs" / f"{time.strftime('%Y%m%d-%H%M%S', _launcher_started())}-{digest}"
    stamp = time.strftime("%Y%m%d-%H%M%S")
    folder = base / "runs" / stamp
    n = 1
    while folder.exists():
        n += 1
        folder = base / "runs" / f"{stamp}-{n}"
    return folder


def _launcher_started() -> time.struct_time:
    """When the process that started this one (a launcher's agent) started; now if unknown."""
    import psutil

    try:
        return time.localtime(psutil.Process(os.getppid()).create_time())
    except (psutil.Error, OSError):
        return time.localtime()


def run(args: argparse.Namespace) -> int:
    """Run the script under a :class:`ScriptWatch`; summarize; return the script's exit code."""
    from codedag.cli.migrate import check_module, parse_command, run_target
    from codedag.integrations.accelerate import ScriptWatch, not_for_evaluation
    from codedag.integrations.watch import WatchSettings
    from codedag.util.paths import check_output_dir

    kind, target, argv = parse_command(args.script_command)
    out = check_output_dir(args.out if args.out is not None else default_out(), "--out")
    rank, world_size = distributed_rank()
    if kind == "module":
        check_module(target)
    if not args.verbose:  # the script's output stays its own: codedag says only what matters
        codedag_log = logging.getLogger("codedag")  # (a rank but 0 of a launch: errors only)
        codedag_log.setLevel(max(codedag_log.getEffectiveLevel(), logging.WARNING))
    settings = WatchSettings(args.plan_budget_s, args.replan, not args.no_store, args.first_epoch)
    watch = ScriptWatch(settings, args.loader, select=not_for_evaluation)
    code: int | None = None
    with watch:
        try:
            code = run_target(kind, target, argv)
        finally:
            results = watch.close()
            results.command = [kind, target, *argv[1:]]
            results.exit_code = code
            from codedag.integrations.run_summary import summary_lines
            from codedag.version import __version__

            results.codedag_version = __version__
            sys.stdout.flush()
            where = f" (rank {rank} of {world_size})" if world_size > 1 else ""
            if rank == 0:  # the other ranks' figures are in their files: one summary on screen
                for line in summary_lines(results, args.loader, f"codedag run{where}"):
                    print(line, file=sys.stderr)
            try:
                path = results.save(out, rank_suffixed(Path(RESULTS_FILE), rank, world_size).name)
                print(f"codedag run{where}: results in {path}", file=sys.stderr)
            except Exception as error:  # the script's exit code matters more than our file
                print(f"codedag run{where}: results not written: {error}", file=sys.stderr)
            try:
                from codedag.cli._run_report import REPORT_FILE, write_run_report

                page = out / rank_suffixed(Path(REPORT_FILE), rank, world_size).name
                print(
                    f"codedag run{where}: report in {write_run_report(results, page)}",
                    file=sys.stderr,
                )
            except Exception as error:
                print(f"codedag run{where}: report not written: {error}", file=sys.stderr)
    return 1 if code is None else code

"""``codedag calibrate``: measure a traced DAG's migratable calls on a device and print the table."""

from __future__ import annotations

import argparse
from typing import Any

from codedag.cli import output
from codedag.cli.output import print_json, stdout_console


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``calibrate`` subcommand."""
    parser = subparsers.add_parser(
        "calibrate",
        parents=[parent],
        help="time each migratable call with its library and through torch on a device",
        description=(
            "Rebuild every migratable call of dag.json from its recorded arguments and time it "
            "both ways on --device: with the original library, and through the migrated path "
            "(values in, torch backend, values out). Results are checked against the library "
            "first and cached per device, library versions, function and argument signature, so "
            "`codedag optimize` reuses them."
        ),
    )
    parser.add_argument("dag", help="execution DAG written by `codedag trace` (dag.json[.gz])")
    add_calibration_options(parser)
    parser.add_argument("--json", action="store_true", help="print the measurements as JSON")
    parser.set_defaults(handler=run)


def add_calibration_options(parser: argparse.ArgumentParser, device: bool = True) -> None:
    """``--device`` (optional), ``--recalibrate`` and ``--calibration-cache-dir`` (also spelled
    ``--cache-dir``), shared with ``optimize``."""
    group = parser.add_argument_group("calibration")
    if device:
        group.add_argument(
            "--device", default="cpu", help="where the migrated path runs: cpu or cuda:i (cpu)"
        )
    group.add_argument(
        "--recalibrate", action="store_true", help="measure again, ignoring cached figures"
    )
    group.add_argument(
        "--calibration-cache-dir",
        "--cache-dir",  # the name before the prefix cache had a folder of its own
        dest="calibration_cache_dir",
        default=None,
        metavar="DIR",
        help="folder of the calibration cache (default: $CODEDAG_CACHE_DIR or the user cache); "
        "--cache-dir is the same option",
    )


def make_cache(args: argparse.Namespace) -> Any:
    """The calibration cache the options name (emptied first with ``--recalibrate``)."""
    from pathlib import Path

    from codedag.calibrate.saved_times import CACHE_FILE, CalibrationCache

    cache = (
        CalibrationCache(Path(args.calibration_cache_dir) / CACHE_FILE)
        if args.calibration_cache_dir
        else CalibrationCache.default()
    )
    if args.recalibrate:
        cache.entries = {}
    return cache


def progress_bar(console: Any) -> tuple[Any, Any]:
    """The calibration's progress bar and its ``progress(done, total, what)`` callback."""
    return output.progress_bar(console, "calibrating {task.description}")


def run(args: argparse.Namespace) -> int:
    """Load the DAG, calibrate it and print the table."""
    from rich.console import Console

    from codedag.calibrate import calibrate_dag
    from codedag.devices.torch_devices import device_exists
    from codedag.errors import UsageError
    from codedag.graph.model import ExecutionDAG
    from codedag.plan import check_device

    try:
        check_device(args.device)
    except ValueError as e:
        raise UsageError(f"--device: {e}") from None
    if not device_exists(args.device):
        raise UsageError(f"--device {args.device} does not exist here")
    dag = ExecutionDAG.load(args.dag)
    console = Console(stderr=True)
    bar, update = progress_bar(console)
    with bar:
        calibration = calibrate_dag(dag, args.device, progress=update, cache=make_cache(args))
    if args.json:
        rows = [m.to_dict() for m in calibration.rows()]
        print_json({"device_name": calibration.device_name, "measurements": rows}, indent=2)
        return 0
    from codedag.calibrate.table import calibration_table

    out = stdout_console()
    out.print(calibration_table(calibration))
    return 0

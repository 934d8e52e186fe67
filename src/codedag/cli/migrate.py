"""``codedag migrate PLAN -- python train.py ...``: run a script with a migration plan applied.

The script runs in this process, as ``python train.py`` would run it, with the plan's
functions patched; the originals are restored when it ends (also on errors and Ctrl-C) and the
per-function counters are printed.

Under torchrun (``torchrun --nproc_per_node N -m codedag migrate PLAN -- train.py``) every rank
runs this command: each patches for its own device (a plan's ``cuda:i`` and ``--device cuda``
become ``cuda:LOCAL_RANK``-relative), prints its own counters under its rank, and writes them to
``--stats-out`` with ``.rank<R>`` before the suffix, so no rank overwrites another's.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from codedag.cli.args import nonempty_path
from codedag.cli.output import print_json
from codedag.errors import UsageError
from codedag.util.text import listing, printable

_PYTHONS = ("python", "python3", f"python{sys.version_info[0]}.{sys.version_info[1]}")


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``migrate`` subcommand."""
    p = subparsers.add_parser(
        "migrate",
        parents=[parent],
        help="run a training script with a migration plan applied",
        description=(
            "Run a Python script (or -m module) in this process with the calls of PLAN moved to "
            "their device through torch backends; print per-function counters at exit."
        ),
        epilog="example: codedag migrate migration_plan.json -- python train.py --epochs 1",
    )
    p.add_argument(
        "plan", type=nonempty_path, help="migration_plan.json written by `codedag optimize`"
    )
    _add_options(p)
    add_script_command(p, "python SCRIPT [ARGS...], python -m MODULE [ARGS...] or SCRIPT [ARGS...]")
    p.set_defaults(handler=run)


def add_script_command(p: argparse.ArgumentParser, forms: str) -> None:
    """The command after ``--`` (``args.script_command``) that :func:`parse_command` reads;
    ``forms`` lists the forms the help shows."""
    p.add_argument(
        "script_command", nargs=argparse.REMAINDER, metavar="-- COMMAND", help=f"after --: {forms}"
    )


def _add_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--device", help="device for plan devices that do not exist here (default: auto)"
    )
    p.add_argument(
        "--stats-out", type=nonempty_path, help="also write the counters to this JSON file"
    )
    p.add_argument("--json", action="store_true", help="print the counters as JSON on stdout")
    p.add_argument(
        "--no-guard",
        action="store_true",
        help="skip the run-time check (by default the first calls of each placed function run "
        "both ways, and a placement that does not save time beyond the noise or differs from the "
        "library is switched off)",
    )
    p.add_argument(
        "--guard-calls", type=int, default=8, help="calls per function the check runs both ways (8)"
    )
    p.add_argument(
        "--guard-margin",
        type=float,
        default=0.0,
        help="share of the library's time a placement must save to be kept, beyond the noise "
        "(0: any saving beyond the noise)",
    )


class _OptionsParser(argparse.ArgumentParser):
    """Parses the options written between PLAN and ``--``; an error is one UsageError line."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"options before --: {message}")


def split_options(args: argparse.Namespace) -> list[str]:
    """Options written between PLAN and ``--`` land in the command: parse them, return the rest."""
    words = list(args.script_command)
    if "--" not in words:
        return words
    cut = words.index("--")
    if cut:
        options = _OptionsParser(prog="codedag migrate", add_help=False)
        _add_options(options)
        parsed = options.parse_args(words[:cut])
        for key, value in vars(parsed).items():
            if value not in (None, False):
                setattr(args, key, value)
    return words[cut + 1 :]


def parse_command(command: list[str]) -> tuple[str, str, list[str]]:
    """``[python] script.py args`` or ``[python] -m module args`` -> (kind, target, argv).

    Raises:
        UsageError: nothing to run, or a program that is not a Python script.
    """
    words = list(command)
    if words and words[0] == "--":
        words = words[1:]
    if words and (os.path.basename(words[0]) in _PYTHONS or words[0] == sys.executable):
        words = words[1:]
    if not words:
        raise UsageError("expected a command after --: python train.py [ARGS...]")
    if words[0] == "-m":
        if len(words) < 2:
            raise UsageError("expected a module after -m")
        return "module", words[1], [words[1], *words[2:]]
    script = words[0]
    if words[0].startswith("-"):
        raise UsageError(f"interpreter option {words[0]!r} is not supported; run a script or -m")
    if not script.endswith(".py") and not Path(script).is_file():
        raise UsageError(
            f"{script!r} is not a Python script; codedag migrate runs Python in-process "
            "(under torchrun: torchrun ... -m codedag migrate PLAN -- train.py)"
        )
    if not Path(script).is_file():
        raise UsageError(f"script {script!r} does not exist")
    return "script", script, [script, *words[1:]]


def check_module(name: str) -> None:
    """Raise :class:`UsageError` when ``python -m name`` would find no module.

    Parent packages are imported to find a submodule, as running it would do.
    """
    import importlib.util

    sys.path.insert(0, os.getcwd())
    try:
        spec = importlib.util.find_spec(name)
    except ImportError as error:  # a missing parent package
        raise UsageError(f"-m {name}: no module named {error.name or name!r}") from None
    except Exception as error:  # the parent package raised while importing
        raise UsageError(
            f"-m {name}: importing its package raised {type(error).__name__}: {error}"
        ) from error
    finally:
        sys.path.remove(os.getcwd())
    if spec is None:
        raise UsageError(f"-m {name}: no module named {name!r}")


def _print_user_traceback(error: BaseException) -> None:
    """The script's traceback as ``python script.py`` prints it, without codedag's frames."""
    import runpy
    import traceback

    tb = error.__traceback__
    ours = {__file__, runpy.__file__}
    while tb is not None and tb.tb_frame.f_code.co_filename in ours:
        tb = tb.tb_next
    traceback.print_exception(type(error), error, tb)


def _run_script(path: str) -> None:
    """Run ``path`` as ``python path`` does: in a ``__main__`` module whose ``__file__`` is
    absolute (a script that changes folder still finds its files beside itself), with
    ``sys.argv[0]`` as typed (``runpy.run_path`` makes both the path it is given)."""
    import builtins
    import importlib.machinery
    import io
    import types

    absolute = os.path.abspath(path)
    with io.open_code(absolute) as source:
        code = compile(source.read(), absolute, "exec", dont_inherit=True)
    module = types.ModuleType("__main__")
    module.__dict__.update(
        __file__=absolute,
        __cached__=None,
        __loader__=importlib.machinery.SourceFileLoader("__main__", absolute),
        __builtins__=builtins,
    )
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def run_target(kind: str, target: str, argv: list[str]) -> int:
    import runpy

    saved_argv, saved_path = sys.argv[:], sys.path[:]
    sys.argv = argv
    if kind == "script":
        sys.path.insert(0, str(Path(target).resolve().parent))
    else:
        sys.path.insert(0, os.getcwd())
    try:
        if kind == "script":
            _run_script(target)
        else:
            runpy.run_module(target, run_name="__main__", alter_sys=True)
    except SystemExit as done:
        code = done.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except Exception as error:  # the script's own error: its traceback, exit 1, as Python does
        _print_user_traceback(error)
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
    return 0


def rank_suffixed(path: Path, rank: int, world_size: int) -> Path:
    """``stats.json`` -> ``stats.rank1.json`` under a launcher with several ranks."""
    if world_size <= 1:
        return path
    return path.with_name(f"{path.stem}.rank{rank}{path.suffix}")


def _guard_text(guard: dict[str, Any]) -> str:
    state = str(guard.get("state", "-"))
    if state == "switched_off":
        return f"switched off: {guard.get('reason', '')}"[:70]
    return state


def _print_table(stats: dict[str, Any], rank: int = 0, world_size: int = 1) -> None:
    from rich.console import Console
    from rich.table import Table

    where = f" (rank {rank} of {world_size})" if world_size > 1 else ""
    table = Table(title=f"codedag migrate: calls per function{where}")
    for column in (
        "function",
        "strategy",
        "migrated",
        "fell back",
        "passed",
        "run-time check",
        "first reason",
    ):
        numeric = column in ("migrated", "fell back", "passed")
        table.add_column(column, justify="right" if numeric else "left")
    for name, row in stats["functions"].items():
        reasons = row["fallback_reasons"]
        first = next(iter(reasons), "")
        table.add_row(
            name,
            row["strategy"],
            str(row["migrated"]),
            str(row["fell_back"]),
            str(row["passed_through"]),
            _guard_text(row.get("guard") or {}),
            first[:60],
        )
    console = Console(stderr=True) if sys.stderr.isatty() else Console(stderr=True, width=160)
    console.print(table)
    for line in not_patched_lines({**stats["skipped"], **stats["failed"]}):
        console.print(line, markup=False)
    batched = stats.get("batched") or {}
    if batched.get("enabled"):
        console.print(batched_table(batched, where))


def not_patched_lines(reasons: dict[str, str]) -> list[str]:
    """One line per reason naming the functions it kept unpatched (the first few, then a count)."""
    by_reason: dict[str, list[str]] = {}
    for name, why in reasons.items():
        by_reason.setdefault(printable(why), []).append(printable(name, 80))
    return [f"not patched: {listing(names)}: {why}" for why, names in by_reason.items()]


def batched_table(batched: dict[str, Any], where: str = "") -> Any:
    """The counters of batched execution (``get_stats()["batched"]``) as a rich table."""
    from rich.table import Table

    table = Table(title=f"codedag migrate: batched chains on {batched['device']}{where}")
    table.add_column("counter")
    table.add_column("value", justify="right")
    forced = batched["forced"]
    rows = [
        ("batches", str(batched["batches"])),
        ("samples", str(batched["samples"])),
        ("groups", str(batched["groups"])),
        ("backend calls", str(batched["backend_calls"])),
        ("host->device bytes", f"{batched['h2d_bytes']:,}"),
        ("device->host bytes", f"{batched['d2h_bytes']:,}"),
        ("forced", ", ".join(f"{r}: {n}" for r, n in forced.items()) or "0"),
        ("worker ms", f"{batched['worker_ms']:.1f}"),
        ("main ms", f"{batched['main_ms']:.1f}"),
    ]
    delivery = batched.get("delivery") or {}
    if delivery.get("on"):
        rows.append(("delivered on", f"{delivery['on']}: {delivery['reason']}".rstrip(": ")))
    verify = batched.get("verify") or {}
    if verify.get("batches"):
        mismatches = verify.get("mismatches") or []
        rows.append(("verified batches", f"{verify['batches']} ({len(mismatches)} differ)"))
    check = batched.get("check") or {}
    if check.get("state", "off") != "off":
        rows.append(("run-time check", f"{check['state']}: {check['reason']}".rstrip(": ")))
    if not batched.get("deferring", True):
        rows.append(("state", "stopped (see the log)"))
    for name, value in rows:
        table.add_row(name, value)
    return table


def run(args: argparse.Namespace) -> int:
    """Apply the plan, run the command, restore, print the counters; returns its exit code."""
    from codedag.devices.distributed import distributed_rank
    from codedag.devices.torch_devices import device_for_rank, require_device
    from codedag.errors import UsageError
    from codedag.migrate.api import PipelineMigrator
    from codedag.migrate.guard import GuardSettings
    from codedag.util.io import atomic_write_json
    from codedag.util.logs import held_logs
    from codedag.util.paths import check_output_file

    kind, target, argv = parse_command(split_options(args))
    rank, world_size = distributed_rank()
    if args.stats_out is not None:
        check_output_file(args.stats_out, "--stats-out")
    # under torchrun --device cuda means this rank's GPU (cuda:LOCAL_RANK)
    device = device_for_rank(require_device(args.device)) if args.device is not None else None
    try:
        guard = None if args.no_guard else GuardSettings(args.guard_calls, args.guard_margin)
    except ValueError as e:
        raise UsageError(f"--guard-calls/--guard-margin: {e}") from None
    with held_logs():  # a plan refused below prints its error alone, not its warnings first
        migrator = PipelineMigrator.from_json(args.plan, default_device=device, guard=guard)
        if kind == "module":
            check_module(target)  # imports its parent packages: the patcher finds their bindings
        migrator.apply()
    try:
        code = run_target(kind, target, argv)
    finally:
        migrator.restore()
        stats = migrator.get_stats().model_dump(mode="json")  # the file's and the table's form
        if world_size > 1:
            stats["rank"], stats["world_size"] = rank, world_size
        if args.stats_out is not None:
            atomic_write_json(rank_suffixed(args.stats_out, rank, world_size), stats)
        if args.json:
            print_json(stats, indent=2)
        else:
            _print_table(stats, rank, world_size)
    return code

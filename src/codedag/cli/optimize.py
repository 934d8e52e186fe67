"""``codedag optimize``: coarsen, partition and refine a traced DAG into a migration plan."""

from __future__ import annotations

import argparse
import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codedag.cli.args import byte_size, first_epoch_flag, integer, number
from codedag.cli.output import print_json

if TYPE_CHECKING:
    from codedag.plan import MigrationPlan

MAX_PARTITIONS = 1024
MAX_GPUS = 256  # the GPUs of one machine: a plan places calls for the processes of one node

log = logging.getLogger(__name__)


def register(subparsers: argparse._SubParsersAction, parent: argparse.ArgumentParser) -> None:
    """Add the ``optimize`` subcommand."""
    parser = subparsers.add_parser(
        "optimize",
        parents=[parent],
        help="partition a traced DAG and write the migration plan",
        description=(
            "Coarsen repeated per-sample work of dag.json, partition it k ways, refine the "
            "partition and write coarsening_result.json, coarsening_graph.dot, "
            "kway_partition.json, optimized_partition.json and migration_plan.json into --out. "
            "With --tune --dataloader MODULE:FACTORY it does every step in one run: trace the "
            "loader (when no dag.json is given), tune its settings as `codedag tune` does, then "
            "plan placement, batched chains, prefix cache and lookup tables with the tuned "
            "workers and threads."
        ),
        epilog="example: codedag optimize --tune --dataloader pkg.data:make_loader --out plan/",
    )
    parser.add_argument(
        "dag",
        nargs="?",
        help="execution DAG written by `codedag trace` (dag.json[.gz]); without it, "
        "--dataloader is traced first",
    )
    parser.add_argument("-k", type=int, default=2, help="number of partitions (default 2)")
    parser.add_argument(
        "--gpus", type=int, default=None, help="GPUs to plan for (default: the ones detected)"
    )
    parser.add_argument(
        "--target-device",
        default=None,
        help="device migrated calls run on: cuda:i, or cpu to run them through torch on the CPU",
    )
    parser.add_argument("--out", default="codedag_optimize", help="output folder")
    parser.add_argument(
        "--max-depth", type=integer(0, 1000), default=5, help="coarsening depth (default 5)"
    )
    parser.add_argument(
        "--max-iterations",
        type=integer(0, 1_000_000),
        default=50,
        help="refinement moves evaluated (default 50)",
    )
    _placement_flags(parser)
    _cache_flags(parser)
    from codedag.cli.calibrate import add_calibration_options

    add_calibration_options(parser, device=False)
    parser.add_argument(
        "--loader",
        metavar="PLAN",
        default=None,
        help="a plan with DataLoader settings from `codedag tune`: placement is measured with "
        "its workers and threads, and the new plan carries them",
    )
    _tune_flags(parser)
    parser.add_argument(
        "--explain",
        action="store_true",
        help="print the placement of each call, a library's internal calls grouped under it "
        "(and with --tune, every DataLoader setting measured)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="with --explain: every call as a row of its own; and every row of the chain, "
        "prefix cache and lookup tables (default: 50 each)",
    )
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.set_defaults(handler=run)


def _placement_flags(parser: argparse.ArgumentParser) -> None:
    """Where calls may go and how placement is decided: measured, assumed or not at all."""
    place = parser.add_argument_group(
        "placement (a call moves only when calibration on the target device says it wins)"
    )
    place.add_argument(
        "--margin",
        type=float,
        default=10.0,
        metavar="PCT",
        help="a call moves only when it saves more than PCT %% of its time (10)",
    )
    place.add_argument(
        "--only",
        nargs="+",
        default=[],
        metavar="NAME",
        help="place nothing but these functions; naming a function kept on the CPU on purpose "
        "(random draws, backends that differ from the library) opts it in",
    )
    place.add_argument(
        "--exclude", nargs="+", default=[], metavar="NAME", help="never place these functions"
    )
    place.add_argument(
        "--assume-speedup",
        type=float,
        default=None,
        metavar="X",
        help="what-if: decide from the traced times divided by X instead of measuring; the plan "
        "labels every decision as an assumption",
    )
    place.add_argument("--speedup", type=float, default=None, help=argparse.SUPPRESS)
    place.add_argument(
        "--bandwidth-gbps",
        type=float,
        default=25.0,
        help="what-if host<->device bandwidth used with --assume-speedup (25 GB/s)",
    )
    place.add_argument(
        "--batched",
        choices=("auto", "always", "never"),
        default="auto",
        help="run each sample's chain of calls once per batch in the main process: auto (where "
        "calibration measures it faster, the default), always or never (docs/placement.md)",
    )
    place.add_argument(
        "--no-calibrate",
        action="store_true",
        help="do not measure: nothing is placed unless --assume-speedup is given",
    )


def _tune_bound(name: str) -> Callable[[str], int]:
    """An argparse type: a whole number from 1 to ``codedag.tune.options``' bound ``name``, read
    when the flag is given (building the parser imports no part of the tuner)."""

    def parse(text: str) -> int:
        from codedag.tune import options

        return integer(1, getattr(options, name))(text)

    parse.__name__ = "integer"
    return parse


def _tune_flags(parser: argparse.ArgumentParser) -> None:
    """Trace and tune a DataLoader before planning: the whole pipeline in one command."""
    week_s = 7 * 24 * 3600.0
    group = parser.add_argument_group(
        "trace and tune first (--tune --dataloader MODULE:FACTORY; the rest as `codedag tune`)"
    )
    group.add_argument(
        "--dataloader",
        metavar="MODULE:FACTORY",
        help="a function returning a torch DataLoader: one batch is traced when no dag.json is "
        "given, and --tune tunes it",
    )
    group.add_argument(
        "--tune",
        action="store_true",
        help="tune the --dataloader's workers, threads and prefetch first, and plan with them: "
        "the plan's loader section",
    )
    seconds = number(above=0, max_value=week_s)
    tuned = {  # codedag tune's flag: its type, metavar, what it sets and tune's default
        "batches": (_tune_bound("MAX_BATCHES"), "N", "batches per setting", "12"),
        "rounds": (_tune_bound("MAX_ROUNDS"), "N", "alternating rounds against your settings", "3"),
        "trial-s": (seconds, "S", "seconds per setting at most", "4"),
        "budget-s": (seconds, "S", "start no new setting after this long", "300"),
        "max-workers": (integer(0), "N", "largest num_workers tried", "default: the CPU limit"),
    }
    for name, (kind, metavar, text, default) in tuned.items():
        group.add_argument(
            f"--tune-{name}",
            type=kind,
            default=None,
            metavar=metavar,
            help=f"{text} (as `codedag tune --{name}`, {default})",
        )


def _cache_flags(parser: argparse.ArgumentParser) -> None:
    """The prefix cache: whether to cut each sample's deterministic prefix, its budget and folder."""
    cache = parser.add_argument_group(
        "prefix cache (each sample's deterministic prefix computed once, read back later)"
    )
    cache.add_argument(
        "--cache",
        choices=("auto", "off"),
        default="auto",
        help="auto: cut each sample's deterministic prefix where the store's measured costs say "
        "it saves time (the default); off: no cache section (docs/cache.md)",
    )
    cache.add_argument(
        "--cache-budget",
        type=byte_size,
        default=None,
        metavar="SIZE",
        help="memory the cached values may take, e.g. 2G or 512M (default: a quarter of the "
        "memory the container may use)",
    )
    cache.add_argument(
        "--prefix-cache-dir",
        default=None,
        metavar="DIR",
        help="folder of the prefix cache's disk tier (default: $CODEDAG_PREFIX_CACHE_DIR or "
        "prefix/ in the user cache)",
    )
    first_epoch_flag(
        cache, "every value in the epoch that computes it, the fastest run of two epochs or more"
    )
    parser.add_argument(
        "--tables",
        choices=("auto", "off"),
        default=None,
        help="auto: element-wise runs on uint8 arrays (a normalization) go through lookup "
        "tables where measured exact and faster; off: no tables section (default: as --cache; "
        "docs/tables.md)",
    )


def _gpu_count() -> int:
    try:
        from codedag.devices.gpus import detect_gpus
    except ImportError:  # pragma: no cover - the monitor package is part of codedag
        return 0
    return int(detect_gpus().count)


def _tuned_loader(path: str) -> object:
    """The loader section of the plan at ``path``; UsageError when it has none."""
    from codedag.errors import UsageError
    from codedag.plan import read_plan

    plan = read_plan(path, source=f"plan {path!r}")
    if plan.loader is None:
        raise UsageError(f"--loader {path}: the plan has no loader section (run `codedag tune`)")
    return plan.loader


def run(args: argparse.Namespace) -> int:
    """Load (or trace) the DAG, tune the loader with --tune, optimize, write the stage files
    and print a summary."""
    from rich.console import Console

    from codedag.graph.model import ExecutionDAG
    from codedag.util.paths import check_output_dir, output_lock

    assume = _checked(args)
    if args.prefix_cache_dir is not None:
        check_output_dir(args.prefix_cache_dir, "--prefix-cache-dir")
    if args.speedup is not None:
        log.warning("--speedup is an assumption: it is now spelled --assume-speedup")
    check_output_dir(args.out)
    loader = _tuned_loader(args.loader) if args.loader else None
    tuning = _tune_args(args) if args.tune else None
    options = None
    if tuning is not None:
        from codedag.cli.tune import tune_options

        options = tune_options(tuning)  # checked against this machine before any work
    console = Console(stderr=True)
    kept = None
    with output_lock(args.out):
        if args.dag is None:
            dag = _traced(args.dataloader, Path(args.out), console)
        else:
            with console.status(f"loading {args.dag}"):
                dag = ExecutionDAG.load(args.dag)
        if tuning is not None:
            from codedag.cli.tune import find_loader, measure
            from codedag.tune.capture import explicit_settings

            tuned_from = find_loader(tuning)
            loader = measure(tuned_from, options)
            kept = loader.kept_line(explicit_settings(tuned_from))
        stats, plan = _plan(args, dag, loader, assume, console)
        if args.dataloader:
            plan = _decide_chains_in_loader(args, plan, console)
    if args.json:
        print_json(stats, indent=2, default=str)
    else:
        from codedag.cli._optimize_summary import print_summary

        print_summary(args, stats, plan, loader if args.tune else None, kept)
    return 0


def _plan(
    args: argparse.Namespace, dag: Any, loader: Any | None, assume: float | None, console: Any
) -> tuple[dict[str, Any], MigrationPlan]:
    """Plan ``dag`` (with ``loader``'s tuned settings, if any) and write the stage files.

    Returns:
        The passes' statistics and the migration plan.
    """
    from codedag.optimize.costs import CostModel
    from codedag.optimize.manager import OptimizerManager
    from codedag.optimize.placement import PlacementSettings

    gpus = args.gpus if args.gpus is not None else _gpu_count()
    from codedag.cli.calibrate import make_cache, progress_bar

    bar, update = progress_bar(console)
    manager = OptimizerManager(
        k=args.k,
        coarsen_max_depth=args.max_depth,
        max_iterations=args.max_iterations,
        gpu_count=gpus,
        target_device=args.target_device,
        cost=CostModel(
            h2d_bandwidth_gbps=args.bandwidth_gbps, d2h_bandwidth_gbps=args.bandwidth_gbps
        ),
        placement=PlacementSettings(
            margin_pct=args.margin,
            only=frozenset(args.only),
            exclude=frozenset(args.exclude),
            assume_speedup=assume,
            batched=args.batched,
        ),
        calibrate=not args.no_calibrate,
        calibration_options={"cache": make_cache(args)},
        progress=update,
        loader=loader,
        cache=args.cache,
        cache_budget_bytes=args.cache_budget,
        cache_folder=args.prefix_cache_dir,
        tables=args.tables,
        first_epoch=args.first_epoch,
    )
    with bar:
        result = manager.optimize(dag, export_dir=Path(args.out))
    return result.statistics, result.plan


def _decide_chains_in_loader(
    args: argparse.Namespace, model: MigrationPlan, console: Any
) -> MigrationPlan:
    """Each measured chain decided in the --dataloader itself, batched against per sample in
    alternating blocks (:mod:`codedag.calibrate.chain_loader`); the plan file is written again.
    """
    from codedag.calibrate.chain_loader import apply_loader_decisions, decide_in_loader
    from codedag.cli.tune import find_loader
    from codedag.util.io import atomic_write_json

    device = model.batched.device
    chains = [
        c for c in model.batched.chains if c.basis == "measured" and c.original_ns is not None
    ]
    if args.batched != "auto" or args.no_calibrate or device is None or not chains:
        return model
    the_loader = find_loader(argparse.Namespace(target=None, dataloader=args.dataloader))
    decisions = {}
    for chain in chains:
        with console.status(f"deciding batched {chain.id} in the loader"):
            decisions[chain.id] = decide_in_loader(model, chain.id, lambda: the_loader, device)
    plan = model.model_copy(update={"batched": apply_loader_decisions(model.batched, decisions)})
    atomic_write_json(Path(args.out) / "migration_plan.json", plan.to_dict())
    return plan


def _traced(spec: str, out: Path, console: Any) -> Any:
    """Trace one batch of ``spec``'s DataLoader as ``codedag trace --dataloader`` does (its
    defaults) and write ``dag.json`` into ``out``."""
    from codedag.cli import trace
    from codedag.cli.args import subcommand_defaults

    args = subcommand_defaults(
        trace.register, ["trace", "--dataloader", spec, "--out", str(out), "--format", "json"]
    )
    tracer = trace.make_tracer(args)
    with console.status(f"tracing a batch of {spec}"):
        trace.trace_loader(spec, tracer, args.warmup)
    trace.write_outputs(tracer.dag, args, ["json"], failed=False)
    return tracer.dag


def _tune_args(args: argparse.Namespace) -> argparse.Namespace:
    """``codedag tune --dataloader SPEC --no-write``'s arguments: its defaults, and the
    ``--tune-*`` flags given."""
    from codedag.cli import tune
    from codedag.cli.args import subcommand_defaults

    tuning = subcommand_defaults(
        tune.register, ["tune", "--dataloader", args.dataloader, "--no-write"]
    )
    for name in ("batches", "rounds", "trial_s", "budget_s", "max_workers"):
        value = getattr(args, f"tune_{name}")
        if value is not None:
            setattr(tuning, name, value)
    return tuning


def _checked(args: argparse.Namespace) -> float | None:
    """Refuse out-of-range flags before any work; the assumed speedup, if one is given."""
    from codedag.errors import UsageError

    if not 1 <= args.k <= MAX_PARTITIONS:
        raise UsageError(f"-k must be >= 1 and <= {MAX_PARTITIONS}, got {args.k}")
    if args.gpus is not None and not 0 <= args.gpus <= MAX_GPUS:
        raise UsageError(
            f"--gpus must be >= 0 and <= {MAX_GPUS} (the GPUs of one machine), got {args.gpus}"
        )
    assume: float | None = args.assume_speedup if args.assume_speedup is not None else args.speedup
    if assume is not None and not (0 < assume <= 1e6):
        raise UsageError(f"--assume-speedup must be a positive number, got {assume} (at most 1e6)")
    if not (0 <= args.margin <= 100):
        raise UsageError(f"--margin must be a percentage >= 0 and <= 100, got {args.margin}")
    if not (0 < args.bandwidth_gbps <= 1e4):
        raise UsageError(
            f"--bandwidth-gbps must be a positive number up to 10000, got {args.bandwidth_gbps}"
        )
    for flag, names in (("--only", args.only), ("--exclude", args.exclude)):
        if any(not name.strip() for name in names):
            raise UsageError(f"{flag}: an empty function name; expected names such as cv2.resize")
    _check_steps(args)
    return assume


def _check_steps(args: argparse.Namespace) -> None:
    """Which steps run: a DAG to load or a loader to trace; --tune needs the loader."""
    from codedag.errors import UsageError

    tune_flags = [
        f"--tune-{name.replace('_', '-')}"
        for name in ("batches", "rounds", "trial_s", "budget_s", "max_workers")
        if getattr(args, f"tune_{name}") is not None
    ]
    if args.tune and not args.dataloader:
        raise UsageError("--tune needs --dataloader MODULE:FACTORY: the DataLoader to tune")
    if tune_flags and not args.tune:
        raise UsageError(f"{tune_flags[0]} goes with --tune")
    if args.tune and args.loader:
        raise UsageError(
            "give --tune (tune the --dataloader now) or --loader PLAN (settings tuned before), "
            "not both"
        )
    if args.dag is None and not args.dataloader:
        raise UsageError(
            "give dag.json (from `codedag trace`), or --dataloader MODULE:FACTORY to trace one"
        )
    if args.dag is not None and args.dataloader and not args.tune:
        raise UsageError(
            "--dataloader with dag.json goes with --tune; without --tune, give one of the two"
        )

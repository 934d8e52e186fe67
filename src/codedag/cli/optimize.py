"""``codedag optimize``: coarsen, partition and refine a traced DAG into a migration plan."""

from __future__ import annotations

import argparse
import json
import logging
import sys
from pathlib import Path

from codedag.cli.args import NON_NEGATIVE_INT, integer, number

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
            "kway_partition.json, optimized_partition.json and migration_plan.json into --out."
        ),
    )
    parser.add_argument("dag", help="execution DAG written by `codedag trace` (dag.json[.gz])")
    parser.add_argument(
        "-k",
        type=integer(1, 4096, "more partitions than calls only adds empty ones"),
        default=2,
        help="number of partitions (default 2)",
    )
    parser.add_argument(
        "--gpus",
        type=integer(0, 1024),
        default=None,
        help="GPUs to plan for (default: the ones detected)",
    )
    parser.add_argument(
        "--target-device",
        default=None,
        help="device migrated calls run on: cuda:i, or cpu to run them through torch on the CPU",
    )
    parser.add_argument("--out", default="codedag_optimize", help="output folder")
    parser.add_argument(
        "--max-depth", type=NON_NEGATIVE_INT, default=5, help="coarsening depth (default 5)"
    )
    parser.add_argument(
        "--max-iterations",
        type=NON_NEGATIVE_INT,
        default=50,
        help="refinement moves evaluated (default 50)",
    )
    cost = parser.add_argument_group("cost model (assumptions of the placement)")
    cost.add_argument(
        "--speedup",
        type=number(above=0, max_value=1e6),
        default=8.0,
        help="accelerator speedup of a migrated call (8)",
    )
    cost.add_argument(
        "--bandwidth-gbps",
        type=number(above=0, max_value=1e6),
        default=25.0,
        help="host<->device copy bandwidth (25 GB/s)",
    )
    cost.add_argument(
        "--launch-overhead-us",
        type=number(0, 1e9),
        default=20.0,
        help="fixed cost of each migrated call instance (20 us)",
    )
    parser.add_argument("--explain", action="store_true", help="print the placement of each call")
    parser.add_argument("--json", action="store_true", help="print the statistics as JSON")
    parser.set_defaults(handler=run)


def _gpu_count() -> int:
    try:
        from codedag.monitor.devices.gpus import detect_gpus
    except ImportError:  # pragma: no cover - the monitor package is part of codedag
        return 0
    return int(detect_gpus().count)


def run(args: argparse.Namespace) -> int:
    """Load the DAG, optimize it, write the stage files and print a summary."""
    from rich.console import Console

    from codedag.graph.model import ExecutionDAG
    from codedag.optimize.costs import CostModel
    from codedag.optimize.explain import plan_table
    from codedag.optimize.manager import OptimizerManager
    from codedag.util.paths import check_output_dir

    check_output_dir(args.out)
    console = Console(stderr=True)
    with console.status(f"loading {args.dag}"):
        dag = ExecutionDAG.load(args.dag)
    gpus = args.gpus if args.gpus is not None else _gpu_count()
    manager = OptimizerManager(
        k=args.k,
        coarsen_max_depth=args.max_depth,
        max_iterations=args.max_iterations,
        gpu_count=gpus,
        target_device=args.target_device,
        cost=CostModel(
            accelerator_speedup=args.speedup,
            h2d_bandwidth_gbps=args.bandwidth_gbps,
            d2h_bandwidth_gbps=args.bandwidth_gbps,
            launch_overhead_ns=int(args.launch_overhead_us * 1000),
        ),
    )
    with console.status(f"optimizing {len(dag.nodes)} nodes"):
        result = manager.optimize(dag, export_dir=Path(args.out))
    stats = result["statistics"]
    plan = result["migration_plan"]
    if args.json:
        json.dump(stats, sys.stdout, indent=2, default=str)
        sys.stdout.write("\n")
    else:
        out = Console() if sys.stdout.isatty() else Console(width=160)
        co, it = stats["coarsening"], stats["iteration"]
        out.print(
            f"coarsened {co.get('original_nodes', 0)} -> {co.get('coarse_nodes', 0)} nodes "
            f"({co.get('clusters', 0)} clusters); k={stats['partitioning'].get('k', 0)}, "
            f"load balance {stats['partitioning'].get('load_balance', 1.0):.3f} -> "
            f"{it.get('load_balance_after', 1.0):.3f}, J {it.get('objective_before', 0):.4f} -> "
            f"{it.get('objective_after', 0):.4f}, edge cut {stats['edge_cut']['optimized']}"
        )
        out.print(
            f"{len(plan['context_device_map'])} call context(s) migrate; "
            f"partitions: {plan['partition_device_map']}; files in {args.out}"
        )
        for note in plan["notes"]:
            out.print(f"note: {note}")
        if args.explain:
            out.print(plan_table(plan))
    return 0

"""Scale and quality of the optimizer passes on synthetic trace-shaped DAGs.

For each size (default 1e3, 1e4, 1e5, 1e6 nodes) of a DataLoader-shaped DAG (per-sample chains
repeated B times per batch, fan-in to collate, batches linked by the sampler's state):

1. wall time and peak traced memory (tracemalloc, in a second run of the same pass) of each pass on
   the full graph: coarsening, k-way partitioning, refinement (``--refine-iterations`` moves), and
   the whole OptimizerManager pipeline (coarsen, then partition/refine/plan on the coarse graph);
   then the growth exponent of each pass (slope of log time against log n) next to n log n's;
2. objective J and edge cut of our partition against METIS (pymetis, same k, same vertex weights),
   all evaluated on the full graph: our pipeline's partition of the coarse graph projected back,
   our passes run on the full graph, and METIS on the full graph;
3. makespan under the cost model on CPU + one accelerator: everything on the CPU, our plan, and
   HEFT list scheduling.

Run: ``.venv/bin/python benchmarks/optimizer_scale.py [--sizes 1000 10000 ...] [--k 2]``
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
import time
import tracemalloc
from collections.abc import Callable
from typing import Any

from codedag.optimize.coarse import CoarsenedDAG
from codedag.optimize.coarsen import GraphCoarsening
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.partition import KWayPartitioner, Partition, edge_cut
from codedag.optimize.placement import PlacementSettings
from codedag.optimize.refine import IterativeOptimizer
from codedag.optimize.schedule import heft, list_schedule
from codedag.optimize.synthetic import trace_shaped_dag
from codedag.optimize.workgraph import build_workgraph


def measure(fn: Callable[[], Any], memory: bool) -> tuple[Any, float, float | None]:
    """(result, wall seconds, peak traced MiB of a second run or None)."""
    gc.collect()
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    peak = None
    if memory:
        gc.collect()
        tracemalloc.start()
        fn()
        peak = tracemalloc.get_traced_memory()[1] / 2**20
        tracemalloc.stop()
    return result, elapsed, peak


def slope(xs: list[float], ys: list[float]) -> float:
    """Least-squares slope of log(y) against log(x)."""
    lx = [math.log(x) for x in xs]
    ly = [math.log(max(y, 1e-9)) for y in ys]
    mx, my = sum(lx) / len(lx), sum(ly) / len(ly)
    den = sum((a - mx) ** 2 for a in lx)
    return sum((a - mx) * (b - my) for a, b in zip(lx, ly)) / den if den else float("nan")


def project(partitions: list[Partition], coarse: CoarsenedDAG) -> list[Partition]:
    """Partitions of the coarse graph as partitions of the original nodes."""
    out = []
    for p in partitions:
        nodes = {i for c in p.nodes for i in coarse.nodes[c].original_ids}
        out.append(Partition(p.id, coarse.nodes[p.center].representative_id, nodes))
    return out


def metis(full: CoarsenedDAG, k: int) -> tuple[list[Partition], float]:
    import numpy as np
    import pymetis

    wg = build_workgraph(full, IterativeOptimizer().cost)
    weights = [max(1, round(w / 1000)) for w in wg.weight]  # microseconds, as METIS wants ints
    start = time.perf_counter()
    graph = pymetis.CSRAdjacency(wg.und_ptr.astype(np.int64), wg.und.astype(np.int64))
    _, parts = pymetis.part_graph(k, graph, vweights=weights)
    elapsed = time.perf_counter() - start
    out = [Partition(p, -1) for p in range(k)]
    for i, p in enumerate(parts):
        out[p].nodes.add(wg.ids[i])
    for p in out:
        p.center = min(p.nodes) if p.nodes else wg.ids[0]
    return out, elapsed


def run_size(n: int, args: argparse.Namespace) -> dict[str, Any]:
    row: dict[str, Any] = {"n": n}
    dag, row["generate_s"], _ = measure(
        lambda: trace_shaped_dag(n, batch_size=args.batch_size, seed=args.seed), False
    )
    row["nodes"], row["edges"] = len(dag.nodes), len(dag.edges)
    memory = not args.no_memory
    coarse, row["coarsen_s"], row["coarsen_mb"] = measure(
        lambda: GraphCoarsening(max_depth=5).coarsen(dag), memory
    )
    row["coarse_nodes"] = len(coarse.nodes)
    full = CoarsenedDAG.identity(dag)
    _, row["index_s"], _ = measure(lambda: build_workgraph(full, IterativeOptimizer().cost), False)
    kway, row["partition_s"], row["partition_mb"] = measure(
        lambda: KWayPartitioner(k=args.k).partition(full), memory
    )
    refiner = IterativeOptimizer(max_iterations=args.refine_iterations, max_cut_increase=1)
    refined, row["refine_s"], row["refine_mb"] = measure(
        lambda: refiner.optimize(kway, full), memory
    )
    # Synthetic DAGs carry no arguments to calibrate: the what-if model places calls here.
    manager = OptimizerManager(
        k=args.k, gpu_count=1, placement=PlacementSettings(assume_speedup=8.0)
    )
    result, row["pipeline_s"], row["pipeline_mb"] = measure(lambda: manager.optimize(dag), memory)

    judge = IterativeOptimizer()
    wg = build_workgraph(full, judge.cost)
    ours = project(result["optimized_partitions"], result["coarsened_dag"])
    candidates = {"ours (pipeline)": ours, "ours (full graph)": refined}
    if not args.no_metis:
        metis_parts, row["metis_s"] = metis(full, args.k)
        candidates["METIS"] = metis_parts
    quality = {}
    for name, parts in candidates.items():
        part = [0] * wg.n
        for p in parts:
            for node in p.nodes:
                part[wg.index[node]] = p.id
        loads = [p_load for p_load in _loads(parts, wg)]
        quality[name] = {
            "J": judge.objective(parts, full),
            "edge_cut": edge_cut(wg, part),
            "balance": (sum(loads) / len(loads)) / max(loads) if max(loads) > 0 else 1.0,
        }
    row["quality"] = quality

    if not args.no_schedule:
        keys = set(result["migration_plan"]["context_device_map"])
        placed = {c.id for c in dag.calls() if c.context_key in keys}
        row["makespan_cpu_ms"] = list_schedule(dag, set()) / 1e6
        row["makespan_ours_ms"] = list_schedule(dag, placed) / 1e6
        row["makespan_heft_ms"] = heft(dag)[0] / 1e6
    return row


def _loads(parts: list[Partition], wg: Any) -> list[float]:
    return [sum(wg.weight[wg.index[n]] for n in p.nodes) for p in parts]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=float, nargs="+", default=[1e3, 1e4, 1e5, 1e6])
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--refine-iterations", type=int, default=1000)
    parser.add_argument("--no-memory", action="store_true", help="skip the tracemalloc runs")
    parser.add_argument("--no-metis", action="store_true")
    parser.add_argument("--no-schedule", action="store_true")
    args = parser.parse_args(argv)
    rows = []
    for size in args.sizes:
        row = run_size(int(size), args)
        rows.append(row)
        print(f"n={row['nodes']}: done", file=sys.stderr, flush=True)

    def mb(x: float | None) -> str:
        return f"{'-':>8}" if x is None else f"{x:8.1f}"

    print(f"\n## Passes on the full graph (k={args.k}, B={args.batch_size}); seconds, peak MiB")
    print(
        f"{'nodes':>9} {'edges':>9} {'coarse':>7} | {'coarsen':>8} {'MiB':>8} | {'partition':>9} "
        f"{'MiB':>8} | {'refine':>7} {'MiB':>8} | {'pipeline':>8} {'MiB':>8} | {'generate':>8}"
    )
    for r in rows:
        print(
            f"{r['nodes']:>9} {r['edges']:>9} {r['coarse_nodes']:>7} | {r['coarsen_s']:8.2f} "
            f"{mb(r['coarsen_mb'])} | {r['partition_s']:9.2f} {mb(r['partition_mb'])} | "
            f"{r['refine_s']:7.2f} {mb(r['refine_mb'])} | {r['pipeline_s']:8.2f} "
            f"{mb(r['pipeline_mb'])} | {r['generate_s']:8.2f}"
        )
    big = [r for r in rows if r["nodes"] >= 5000] or rows
    if len(big) >= 2:
        ns = [float(r["nodes"]) for r in big]
        nlogn = slope(ns, [x * math.log(x) for x in ns])
        print(f"\ngrowth exponent over {int(ns[0])}..{int(ns[-1])} nodes (n log n: {nlogn:.2f}):")
        for key in ("coarsen_s", "partition_s", "refine_s", "pipeline_s"):
            print(f"  {key[:-2]:<10} {slope(ns, [r[key] for r in big]):.2f}")
    print(f"\n## Partition quality on the full graph, k={args.k} (J lower is better)")
    print(
        f"{'nodes':>9}  {'partitioner':<18} {'J':>8} {'edge cut':>9} {'balance':>8} {'J/METIS':>8}"
    )
    for r in rows:
        ref = r["quality"].get("METIS")
        for name, q in r["quality"].items():
            ratio = f"{q['J'] / ref['J']:8.3f}" if ref and ref["J"] > 0 else "       -"
            print(
                f"{r['nodes']:>9}  {name:<18} {q['J']:8.4f} {q['edge_cut']:>9} "
                f"{q['balance']:8.3f} {ratio}"
            )
    if not args.no_schedule:
        print("\n## Makespan on CPU + 1 accelerator under the cost model (ms)")
        print(
            f"{'nodes':>9} {'all CPU':>10} {'ours':>10} {'HEFT':>10} {'ours/HEFT':>10} {'CPU/ours':>9}"
        )
        for r in rows:
            print(
                f"{r['nodes']:>9} {r['makespan_cpu_ms']:10.1f} {r['makespan_ours_ms']:10.1f} "
                f"{r['makespan_heft_ms']:10.1f} {r['makespan_ours_ms'] / r['makespan_heft_ms']:10.3f} "
                f"{r['makespan_cpu_ms'] / r['makespan_ours_ms']:9.3f}"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Makespan of a two-device placement under the cost model, and HEFT as a reference scheduler.

Tasks are the calls of a (coarsened) DAG. A call takes its measured self time on the CPU and
``self / speedup + launch overhead x instances`` on the accelerator (only if migratable). A call
waits for its caller (no transfer) and for the calls whose values it uses; a value crossing devices
costs ``nbytes / bandwidth``. Each device runs one task at a time (the DataLoader's main process and
one CUDA stream). Tasks are taken in decreasing upward rank; :func:`heft` picks, for each task, the
device with the earliest finish time (HEFT without insertion), :func:`list_schedule` keeps a given
placement. Used by ``benchmarks/optimizer_scale.py`` to compare our placement with HEFT on the
same model.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from codedag.optimize.costs import CanMigrate, CostModel, default_can_migrate
from codedag.optimize.partition import as_coarse

CPU, ACCEL = 0, 1


@dataclass
class _Tasks:
    ids: list[int]
    cost: list[tuple[float, float]]  # (cpu ns, accelerator ns or inf)
    preds: list[list[tuple[int, int]]]  # (task, bytes)
    order: list[int]  # decreasing upward rank, predecessors first


def _tasks(dag: object, cost: CostModel, can_migrate: CanMigrate) -> _Tasks:
    coarse = as_coarse(dag)
    calls = sorted(n.id for n in coarse.calls())
    index = {c: i for i, c in enumerate(calls)}
    costs: list[tuple[float, float]] = []
    for c in calls:
        node = coarse.nodes[c]
        cpu = float(node.self_ns)
        accel = (
            cpu / cost.accelerator_speedup + cost.launch_ns(node.instance_count)
            if can_migrate(node.name)
            else math.inf
        )
        costs.append((cpu, accel))
    preds: list[list[tuple[int, int]]] = [[] for _ in calls]
    succs: list[list[tuple[int, int]]] = [[] for _ in calls]
    for src, dst, kind in coarse.edges:
        if kind == "calls":
            pairs = [(src, dst, 0)]
        elif kind == "uses":
            nbytes = coarse.nodes[src].nbytes
            pairs = [(p, dst, nbytes) for p in coarse.predecessors(src, "produces")]
        else:
            continue
        for a, b, nbytes in pairs:
            ia, ib = index[a], index[b]
            preds[ib].append((ia, nbytes))
            succs[ia].append((ib, nbytes))
    # upward rank with mean costs; reverse topological order by Kahn's algorithm
    indeg = [len(p) for p in preds]
    topo = [i for i, d in enumerate(indeg) if d == 0]
    for i in topo:
        for s, _ in succs[i]:
            indeg[s] -= 1
            if indeg[s] == 0:
                topo.append(s)
    bw = (cost.h2d_bandwidth_gbps + cost.d2h_bandwidth_gbps) / 2
    rank = [0.0] * len(calls)
    for i in reversed(topo):
        cpu, accel = costs[i]
        mean = cpu if math.isinf(accel) else (cpu + accel) / 2
        best = 0.0
        for s, nbytes in succs[i]:
            best = max(best, nbytes / bw / 2 + rank[s])
        rank[i] = mean + best
    # rank(caller) >= rank(callee) since costs are >= 0, and ties keep topological order:
    # the sorted order is a valid schedule order.
    position = {t: p for p, t in enumerate(topo)}
    order = sorted(topo, key=lambda t: (-rank[t], position[t]))
    return _Tasks(calls, costs, preds, order)


def _run(tasks: _Tasks, cost: CostModel, fixed: list[int] | None) -> tuple[float, list[int]]:
    n = len(tasks.ids)
    finish = [0.0] * n
    device = [CPU] * n
    free = [0.0, 0.0]
    for t in tasks.order:
        options = (CPU, ACCEL) if fixed is None else (fixed[t],)
        best: tuple[float, int] | None = None
        for d in options:
            run_ns = tasks.cost[t][d]
            if math.isinf(run_ns):
                continue
            ready = 0.0
            for p, nbytes in tasks.preds[t]:
                arrive = finish[p]
                if device[p] != d and nbytes:
                    bw = cost.h2d_bandwidth_gbps if d == ACCEL else cost.d2h_bandwidth_gbps
                    arrive += nbytes / bw
                ready = max(ready, arrive)
            end = max(ready, free[d]) + run_ns
            if best is None or end < best[0]:
                best = (end, d)
        assert best is not None  # the CPU is always an option
        finish[t], device[t] = best
        free[best[1]] = best[0]
    return max(finish, default=0.0), device


def list_schedule(
    dag: object,
    on_accelerator: Mapping[int, bool] | set[int],
    cost: CostModel | None = None,
    can_migrate: CanMigrate | None = None,
) -> float:
    """Makespan (ns) with the calls in ``on_accelerator`` (call ids) on the accelerator."""
    cost = cost or CostModel()
    tasks = _tasks(dag, cost, can_migrate or default_can_migrate())
    fixed = [
        ACCEL if c in on_accelerator and not math.isinf(tasks.cost[i][ACCEL]) else CPU
        for i, c in enumerate(tasks.ids)
    ]
    return _run(tasks, cost, fixed)[0]


def heft(
    dag: object, cost: CostModel | None = None, can_migrate: CanMigrate | None = None
) -> tuple[float, set[int]]:
    """HEFT (without insertion) on CPU + one accelerator: (makespan ns, call ids it puts on it)."""
    cost = cost or CostModel()
    tasks = _tasks(dag, cost, can_migrate or default_can_migrate())
    makespan, device = _run(tasks, cost, None)
    return makespan, {tasks.ids[i] for i, d in enumerate(device) if d == ACCEL}

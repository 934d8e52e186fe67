"""Iterative refinement: boundary moves from a gain heap that lower the objective.

``J = alpha * CV(partition loads) + beta * max(CP) / mean(CP)``, where CP is the critical path of
a partition (the heaviest path through the DAG restricted to that partition's nodes and edges).

Every boundary node (a node with a neighbor in another partition) yields candidate moves, ordered
by an estimated gain (the exact change of the load term, with fewer cut edges breaking ties). A
popped move is checked against the validity rules (the node is still in its partition and still on
that boundary, is not a center, does not empty its partition, does not raise the edge cut by more
than ``max_cut_increase``), applied, and kept only if the exact
J falls; otherwise it is undone. So J never increases. Critical paths are kept incrementally: a
move re-evaluates only the moved node and the nodes downstream of it in the two partitions involved,
in topological order, stopping where a value does not change; per-partition maxima live in lazy
heaps. Stops after ``max_iterations`` evaluated moves, after ``no_improvement_threshold``
consecutive rejected moves, or when no candidate is left.
"""

from __future__ import annotations

import heapq
import logging
import time
from typing import Any

from codedag.errors import ConfigError
from codedag.optimize.costs import CostModel
from codedag.optimize.partition import (
    Partition,
    as_coarse,
    assignment_of,
    build_partitions,
    edge_cut,
    load_stats,
)
from codedag.optimize.workgraph import WorkGraph, build_workgraph

log = logging.getLogger(__name__)


class _State:
    """Assignment, loads and incrementally maintained critical paths."""

    def __init__(self, wg: WorkGraph, part: list[int], k: int) -> None:
        self.wg = wg
        self.part = part
        self.k = k
        self.loads = [0.0] * k
        self.sizes = [0] * k
        for i, p in enumerate(part):
            self.loads[p] += wg.weight[i]
            self.sizes[p] += 1
        self.pos = [0] * wg.n
        for order, v in enumerate(wg.topo):
            self.pos[v] = order
        self.down = [0.0] * wg.n
        self.heaps: list[list[tuple[float, int]]] = [[] for _ in range(k)]
        for v in wg.topo:
            self.down[v] = self._path_to(v)
            self.heaps[part[v]].append((-self.down[v], v))
        for heap in self.heaps:
            heapq.heapify(heap)

    def _path_to(self, v: int) -> float:
        """The heaviest path ending at ``v`` within its partition: ``v``'s weight plus the
        heaviest of its predecessors' in the same partition."""
        pp, pl, part, down = self.wg.pred_ptr, self.wg.pred, self.part, self.down
        pv = part[v]
        best = 0.0
        for j in range(pp[v], pp[v + 1]):
            u = pl[j]
            if part[u] == pv and down[u] > best:
                best = down[u]
        return self.wg.weight[v] + best

    def critical_path(self, p: int) -> float:
        heap, part, down = self.heaps[p], self.part, self.down
        while heap:
            neg, v = heap[0]
            if part[v] == p and down[v] == -neg:
                return -neg
            heapq.heappop(heap)
        return 0.0

    def objective(self, alpha: float, beta: float) -> tuple[float, float, float]:
        """(J, CV of loads, max CP / mean CP)."""
        cv = load_stats(self.loads)["cv"]
        cps = [self.critical_path(p) for p in range(self.k)]
        mean_cp = sum(cps) / len(cps) if cps else 0.0
        ratio = max(cps) / mean_cp if mean_cp > 0 else 0.0
        return alpha * cv + beta * ratio, cv, ratio

    def move(self, v: int, q: int) -> None:
        wg, part, down, pos = self.wg, self.part, self.down, self.pos
        p = part[v]
        part[v] = q
        w = wg.weight
        self.loads[p] -= w[v]
        self.loads[q] += w[v]
        self.sizes[p] -= 1
        self.sizes[q] += 1
        sp, sl = wg.succ_ptr, wg.succ
        work = [(pos[v], v)]
        queued = {v}
        for j in range(sp[v], sp[v + 1]):
            s = sl[j]
            if part[s] in (p, q) and s not in queued:
                queued.add(s)
                work.append((pos[s], s))
        heapq.heapify(work)
        while work:
            _, u = heapq.heappop(work)
            queued.discard(u)
            pu = part[u]
            new = self._path_to(u)
            if new == down[u] and u != v:
                continue
            down[u] = new
            heapq.heappush(self.heaps[pu], (-new, u))
            for j in range(sp[u], sp[u + 1]):
                s = sl[j]
                if part[s] == pu and s not in queued:
                    queued.add(s)
                    heapq.heappush(work, (pos[s], s))


class IterativeOptimizer:
    """Refine a k-way partition by boundary moves that lower J.

    Args:
        max_iterations: most moves evaluated.
        alpha: weight of the coefficient of variation of partition loads.
        beta: weight of max critical path / mean critical path.
        no_improvement_threshold: stop after this many consecutive rejected moves.
        max_cut_increase: validity rule: a move may raise the edge cut by at most this much
            (0: moves never scatter nodes across the boundary).
        cost: the cost model whose memory term enters node weights.
    """

    def __init__(
        self,
        max_iterations: int = 50,
        alpha: float = 1.0,
        beta: float = 0.5,
        no_improvement_threshold: int = 10,
        max_cut_increase: int = 0,
        cost: CostModel | None = None,
    ) -> None:
        if max_iterations < 0 or no_improvement_threshold < 1:
            raise ConfigError(
                "max_iterations must be >= 0 and no_improvement_threshold >= 1, got "
                f"{max_iterations} and {no_improvement_threshold}"
            )
        self.max_iterations = max_iterations
        self.alpha, self.beta = alpha, beta
        self.no_improvement_threshold = no_improvement_threshold
        self.max_cut_increase = max_cut_increase
        self.cost = cost or CostModel()
        self.stats: dict[str, Any] = {}

    def objective(self, partitions: list[Partition], dag: object) -> float:
        """J of a partition of ``dag``."""
        wg = build_workgraph(as_coarse(dag), self.cost)
        part = assignment_of(partitions, wg)
        return _State(wg, part, len(partitions)).objective(self.alpha, self.beta)[0]

    def optimize(self, partitions: list[Partition], dag: object) -> list[Partition]:
        """Return refined partitions (new objects; the input is not modified)."""
        start = time.perf_counter()
        wg = build_workgraph(as_coarse(dag), self.cost)
        k = len(partitions)
        if k == 0:
            self.stats = {"iterations": 0, "accepted_moves": 0, "objective_history": []}
            return []
        if sorted(p.id for p in partitions) != list(range(k)):
            raise ConfigError(f"partition ids must be 0..{k - 1}, got {[p.id for p in partitions]}")
        part = assignment_of(partitions, wg)
        centers = [wg.index[p.center] for p in sorted(partitions, key=lambda p: p.id)]
        state = _State(wg, part, k)
        cut_before = edge_cut(wg, part)
        j_cur, cv, ratio = state.objective(self.alpha, self.beta)
        history = [j_cur]
        start_stats = {"objective": j_cur, "load_cv": cv, "critical_path_ratio": ratio}
        descent = _Descent(self, state, wg, part, set(centers))
        iterations, accepted, stale = descent.run(j_cur, history)
        j_end, cv_end, ratio_end = state.objective(self.alpha, self.beta)
        result = build_partitions(wg, part, centers)
        self.stats = {
            "iterations": iterations,
            "accepted_moves": accepted,
            "stale_candidates": stale,
            "max_iterations": self.max_iterations,
            "objective_before": start_stats["objective"],
            "objective_after": j_end,
            "load_cv_before": start_stats["load_cv"],
            "load_cv_after": cv_end,
            "critical_path_ratio_before": start_stats["critical_path_ratio"],
            "critical_path_ratio_after": ratio_end,
            "critical_paths": [state.critical_path(p) for p in range(k)],
            "objective_history": history,
            "edge_cut_before": cut_before,
            "edge_cut_after": edge_cut(wg, part),
            "time_s": time.perf_counter() - start,
        }
        self.stats.update({f"{key}_after": val for key, val in load_stats(state.loads).items()})
        return result

    def _load_gain(self, state: _State, v: int, q: int) -> float:
        """Exact decrease of alpha * CV(loads) if ``v`` moved to ``q``."""
        loads = state.loads
        w = state.wg.weight[v]
        p = state.part[v]
        after = list(loads)
        after[p] -= w
        after[q] += w
        return self.alpha * (load_stats(loads)["cv"] - load_stats(after)["cv"])


class _Descent:
    """Greedy moves of boundary nodes, best load gain first, kept only when J decreases."""

    def __init__(
        self,
        refiner: IterativeOptimizer,
        state: _State,
        wg: Any,
        part: list[int],
        centers: set[int],
    ) -> None:
        self.refiner = refiner
        self.state = state
        self.part = part
        self.centers = centers
        self.ptr, self.nbr = wg.und_ptr.tolist(), wg.und.tolist()
        self.n = wg.n

    def moves_of(self, v: int) -> list[tuple[float, int, int]]:
        """Heap entries ``(-gain, v, q)`` for moving ``v`` to each neighbouring partition ``q``."""
        if v in self.centers:
            return []
        part, pv = self.part, self.part[v]
        links: dict[int, int] = {}
        for j in range(self.ptr[v], self.ptr[v + 1]):
            q = part[self.nbr[j]]
            links[q] = links.get(q, 0) + 1
        own = links.get(pv, 0)
        return [
            (-(self.refiner._load_gain(self.state, v, q) + 1e-9 * (n - own)), v, q)
            for q, n in links.items()
            if q != pv and own - n <= self.refiner.max_cut_increase
        ]

    def run(self, j_cur: float, history: list[float]) -> tuple[int, int, int]:
        """Move until the heap empties, the iteration cap, or too many rejections in a row.

        Returns:
            (iterations, accepted moves, stale heap entries); ``history`` gets each accepted J.
        """
        refiner, state, part, ptr, nbr = self.refiner, self.state, self.part, self.ptr, self.nbr
        heap = [move for v in range(self.n) for move in self.moves_of(v)]
        heapq.heapify(heap)
        iterations = accepted = stale = rejected_streak = 0
        while heap and iterations < refiner.max_iterations:
            _, v, q = heapq.heappop(heap)
            p = part[v]
            around = [part[u] for u in nbr[ptr[v] : ptr[v + 1]]]
            to_q = around.count(q)
            if (
                p == q
                or state.sizes[p] <= 1
                or not to_q
                or around.count(p) - to_q > refiner.max_cut_increase
            ):
                stale += 1
                continue
            iterations += 1
            state.move(v, q)
            j_new = state.objective(refiner.alpha, refiner.beta)[0]
            if j_new < j_cur - 1e-12 * max(1.0, abs(j_cur)):
                j_cur = j_new
                history.append(j_cur)
                accepted += 1
                rejected_streak = 0
                for u in (v, *nbr[ptr[v] : ptr[v + 1]]):
                    for move in self.moves_of(u):
                        heapq.heappush(heap, move)
            else:
                state.move(v, p)
                rejected_streak += 1
                if rejected_streak >= refiner.no_improvement_threshold:
                    break
        return iterations, accepted, stale

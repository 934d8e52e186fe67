"""K-way partitioning: k centers, then greedy region growing from them.

Weights are measured self time plus a memory term (:meth:`CostModel.node_weight`). Distances are
undirected BFS hops from the k centers only (k vectorized BFS passes), normalized by the DAG's
longest path; no all-pairs distances, no exact diameter (O(n*m)).

- Centers: each maximizes ``lambda * distance to the chosen centers + (1 - lambda) * weight
  share``; the first one's distances are taken from the heaviest node (a sweep: with one center
  in the middle of the graph, the others get enclosed and starve), and for k = 1 it is the
  heaviest node itself.
- Growth: each partition keeps a heap of its frontier keyed by
  ``alpha * weight / max weight - beta * distance to the center``; each step takes, over the k
  heap tops, the best ``key - gamma * load penalty`` with the penalty
  ``max(0, load_after / (total / k) - 1) ** 2``: O((n + m) log n + n k) in all. The original
  penalty divided by the running mean load, which is near zero early on; the fixed target
  ``total / k`` avoids that.
- Nodes no center reaches (other components) go, one component at a time, to the least loaded
  partition.
"""

from __future__ import annotations

import heapq
import logging
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from codedag.errors import ConfigError
from codedag.optimize.coarse import CoarsenedDAG
from codedag.optimize.costs import CostModel
from codedag.optimize.workgraph import WorkGraph, build_workgraph

log = logging.getLogger(__name__)


@dataclass
class Partition:
    """One part of a k-way partition.

    Attributes:
        id: partition number, 0..k-1.
        center: coarse id of the partition's center node.
        nodes: coarse ids of its nodes.
        total_compute: sum of the nodes' weights (ns of measured time plus the memory term).
    """

    id: int
    center: int
    nodes: set[int] = field(default_factory=set)
    total_compute: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """Plain data."""
        return {
            "id": self.id,
            "center": self.center,
            "total_compute": self.total_compute,
            "node_count": len(self.nodes),
            "nodes": sorted(self.nodes),
        }


def as_coarse(dag: Any) -> CoarsenedDAG:
    """Accept a :class:`CoarsenedDAG` or an ExecutionDAG (each node its own cluster)."""
    if isinstance(dag, CoarsenedDAG):
        return dag
    if hasattr(dag, "nodes") and hasattr(dag, "edges"):
        return CoarsenedDAG.identity(dag)
    raise ConfigError(f"expected an ExecutionDAG or CoarsenedDAG, got {type(dag).__name__}")


def assignment_of(partitions: list[Partition], wg: WorkGraph) -> list[int]:
    """Partition number by node index; raise ConfigError unless each node is in exactly one."""
    part = [-1] * wg.n
    for p in partitions:
        for node_id in p.nodes:
            i = wg.index.get(node_id)
            if i is None or part[i] != -1:
                raise ConfigError(
                    f"node {node_id} is unknown or in two partitions; expected each node of the "
                    "DAG in exactly one partition"
                )
            part[i] = p.id
    if -1 in part:
        raise ConfigError(f"node {wg.ids[part.index(-1)]} is in no partition")
    return part


def edge_cut(wg: WorkGraph, part: list[int]) -> int:
    """Number of (deduplicated, directed) edges whose ends lie in different partitions."""
    if wg.n == 0:
        return 0
    arr = np.asarray(part)
    counts = np.diff(np.asarray(wg.succ_ptr))
    src = np.repeat(np.arange(wg.n), counts)
    return int(np.count_nonzero(arr[src] != arr[np.asarray(wg.succ, dtype=np.int64)]))


def build_partitions(wg: WorkGraph, part: list[int], centers: list[int]) -> list[Partition]:
    """Partition objects (coarse ids) from an assignment by index."""
    out = [Partition(id=p, center=wg.ids[c]) for p, c in enumerate(centers)]
    ids, weight = wg.ids, wg.weight
    for i, p in enumerate(part):
        out[p].nodes.add(ids[i])
        out[p].total_compute += weight[i]
    return out


def load_stats(loads: list[float]) -> dict[str, float]:
    """Mean, max, coefficient of variation and balance (mean / max, 1.0 is perfect)."""
    if not loads:
        return {"mean": 0.0, "max": 0.0, "cv": 0.0, "load_balance": 1.0}
    mean = sum(loads) / len(loads)
    top = max(loads)
    std = (sum((x - mean) ** 2 for x in loads) / len(loads)) ** 0.5
    return {
        "mean": mean,
        "max": top,
        "cv": std / mean if mean > 0 else 0.0,
        "load_balance": mean / top if top > 0 else 1.0,
    }


def _normalized(dist: np.ndarray, hops: int) -> np.ndarray:
    """BFS hops divided by the longest path; unreachable nodes count as one hop past the farthest."""
    far = float(dist.max()) + 1.0 if dist.size else 1.0
    return np.where(dist < 0, far, dist).astype(np.float64) / hops


class KWayPartitioner:
    """Split a (coarsened) DAG into k partitions around k centers.

    Args:
        k: number of partitions; clamped (with a warning) to the node count.
        alpha: weight of a node's performance share in the assignment score.
        beta: weight of its normalized distance to the partition's center.
        gamma: weight of the load penalty.
        lambda_weight: center choice, distance (1.0) versus weight share (0.0).
        cost: the cost model whose memory term enters node weights.
    """

    def __init__(
        self,
        k: int = 2,
        alpha: float = 1.0,
        beta: float = 0.5,
        gamma: float = 10.0,
        lambda_weight: float = 0.5,
        cost: CostModel | None = None,
    ) -> None:
        if not isinstance(k, int) or k < 1:
            raise ConfigError(f"k must be an integer >= 1, got {k!r}")
        if not 0.0 <= lambda_weight <= 1.0:
            raise ConfigError(f"lambda_weight must be in [0, 1], got {lambda_weight}")
        self.k = k
        self.alpha, self.beta, self.gamma = alpha, beta, gamma
        self.lambda_weight = lambda_weight
        self.cost = cost or CostModel()
        self.stats: dict[str, Any] = {}

    def partition(self, dag: object) -> list[Partition]:
        """Return k partitions (fewer when the DAG has fewer nodes; none for an empty DAG)."""
        start = time.perf_counter()
        coarse = as_coarse(dag)
        wg = build_workgraph(coarse, self.cost)
        k = self.k
        if wg.n == 0:
            self.stats = {"k": 0, "requested_k": self.k, "loads": [], "edge_cut": 0, "time_s": 0.0}
            self.stats.update(load_stats([]))
            return []
        if k > wg.n:
            log.warning("k=%d is larger than the %d nodes of the DAG; using k=%d", k, wg.n, wg.n)
            k = wg.n
        hops = max(wg.longest_path_hops, 1)
        centers, dists = self._select_centers(wg, k, hops)
        part = self._grow(wg, centers, dists, hops)
        self._place_isolated(wg, part, k)
        partitions = build_partitions(wg, part, centers)
        loads = [p.total_compute for p in partitions]
        self.stats = {
            "k": k,
            "requested_k": self.k,
            "centers": [wg.ids[c] for c in centers],
            "loads": loads,
            "node_counts": [len(p.nodes) for p in partitions],
            "longest_path_hops": wg.longest_path_hops,
            "edge_cut": edge_cut(wg, part),
            "time_s": time.perf_counter() - start,
        }
        self.stats.update(load_stats(loads))
        return partitions

    def _select_centers(
        self, wg: WorkGraph, k: int, hops: int
    ) -> tuple[list[int], list[list[int]]]:
        weight = np.asarray(wg.weight, dtype=np.float64)
        total = float(weight.sum()) or 1.0
        share = weight / total
        lam = self.lambda_weight
        centers: list[int] = []
        dists: list[list[int]] = []
        # Sweep start: distances from the heaviest node, so that with k >= 2 the first center is
        # not wherever the heaviest node happens to sit (a center in the middle of the graph
        # encloses the others and starves their growth).
        nearest: Any = _normalized(wg.bfs([int(np.argmax(weight))]), hops) if k > 1 else None
        for _ in range(k):
            score = (1.0 - lam) * share
            if nearest is not None:
                score = score + lam * nearest
            if centers:
                score[np.asarray(centers)] = -np.inf
            center = int(np.argmax(score))
            centers.append(center)
            dist = wg.bfs([center])
            dists.append(dist.tolist())
            norm = _normalized(dist, hops)
            nearest = norm if len(centers) == 1 else np.minimum(nearest, norm)
        return centers, dists

    def _grow(
        self, wg: WorkGraph, centers: list[int], dists: list[list[int]], hops: int
    ) -> list[int]:
        weight = wg.weight
        k = len(centers)
        part = [-1] * wg.n
        loads = [0.0] * k
        for p, c in enumerate(centers):
            part[c] = p
            loads[p] += weight[c]
        total = sum(weight)
        target = total / k if total > 0 else 1.0
        max_w = max(weight) or 1.0
        alpha, beta, gamma = self.alpha, self.beta, self.gamma
        ptr, nbr = wg.und_ptr.tolist(), wg.und.tolist()

        far = [max(d) + 1 for d in dists]

        def base(v: int, p: int) -> float:
            d = dists[p][v]
            return alpha * weight[v] / max_w - beta * (d if d >= 0 else far[p]) / hops

        heaps: list[list[tuple[float, int]]] = [[] for _ in range(k)]
        for p, c in enumerate(centers):
            heaps[p] = [(-base(u, p), u) for u in nbr[ptr[c] : ptr[c + 1]] if part[u] < 0]
            heapq.heapify(heaps[p])
        while True:
            best_p, best_score = -1, 0.0
            for p in range(k):
                heap = heaps[p]
                while heap and part[heap[0][1]] >= 0:
                    heapq.heappop(heap)
                if not heap:
                    continue
                neg, v = heap[0]
                over = (loads[p] + weight[v]) / target - 1.0
                score = -neg - (gamma * over * over if over > 0 else 0.0)
                if best_p < 0 or score > best_score:
                    best_p, best_score = p, score
            if best_p < 0:
                return part
            _, v = heapq.heappop(heaps[best_p])
            part[v] = best_p
            loads[best_p] += weight[v]
            heap = heaps[best_p]
            for u in nbr[ptr[v] : ptr[v + 1]]:
                if part[u] < 0:
                    heapq.heappush(heap, (-base(u, best_p), u))

    def _place_isolated(self, wg: WorkGraph, part: list[int], k: int) -> None:
        """Assign each component no center reached, whole, to the least loaded partition."""
        if -1 not in part:
            return
        loads = [0.0] * k
        for i, p in enumerate(part):
            if p >= 0:
                loads[p] += wg.weight[i]
        ptr, nbr = wg.und_ptr.tolist(), wg.und.tolist()
        for start in range(wg.n):
            if part[start] >= 0:
                continue
            target = min(range(k), key=lambda p: (loads[p], p))
            part[start] = target
            stack = [start]
            while stack:
                v = stack.pop()
                loads[target] += wg.weight[v]
                for j in range(ptr[v], ptr[v + 1]):
                    u = nbr[j]
                    if part[u] < 0:
                        part[u] = target
                        stack.append(u)

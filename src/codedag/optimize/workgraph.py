"""A compact, index-based view of a (coarsened) DAG for the partitioning passes.

Nodes are numbered 0..n-1 in coarse-id order; adjacency is CSR (numpy for the vectorized BFS,
Python lists for the loops that walk it). Built once per DAG and cached on it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import rustworkx as rx

from codedag.errors import GraphError
from codedag.optimize.coarse import CoarsenedDAG
from codedag.optimize.costs import CostModel


@dataclass
class WorkGraph:
    """Index-based DAG: weights, directed and undirected CSR adjacency, a topological order."""

    ids: list[int]
    index: dict[int, int]
    weight: list[float]
    is_call: list[bool]
    succ_ptr: list[int]
    succ: list[int]
    pred_ptr: list[int]
    pred: list[int]
    und_ptr: np.ndarray
    und: np.ndarray
    topo: list[int]
    longest_path_hops: int

    @property
    def n(self) -> int:
        """Node count."""
        return len(self.ids)

    def bfs(self, sources: list[int]) -> np.ndarray:
        """Undirected hop distances from the nearest source; -1 where unreachable.

        Level-synchronous and vectorized: each level gathers the frontier's neighbors at once.
        """
        dist = np.full(self.n, -1, dtype=np.int64)
        if not sources:
            return dist
        frontier = _unique(np.asarray(sources, dtype=np.int64))
        dist[frontier] = 0
        ptr, nbr = self.und_ptr, self.und
        level = 0
        while frontier.size:
            level += 1
            starts = ptr[frontier]
            counts = ptr[frontier + 1] - starts
            total = int(counts.sum())
            if total == 0:
                break
            offsets = np.repeat(starts - np.cumsum(counts) + counts, counts) + np.arange(total)
            reached = nbr[offsets]
            reached = _unique(reached[dist[reached] < 0])
            dist[reached] = level
            frontier = reached
        return dist


def _unique(values: np.ndarray) -> np.ndarray:
    """``np.unique`` of a 1-D integer array, without its first call importing ``numpy.ma``
    (about 30 ms, which planning a loader needs for nothing else)."""
    ordered = np.sort(values)
    if ordered.size < 2:
        return ordered
    keep = np.empty(ordered.size, dtype=bool)
    keep[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=keep[1:])
    return ordered[keep]


def _csr(n: int, src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    order = np.lexsort((dst, src))
    counts = np.bincount(src, minlength=n)
    ptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr, dst[order].astype(np.int64)


def build_workgraph(dag: CoarsenedDAG, cost: CostModel) -> WorkGraph:
    """Index the coarsened DAG; raise :class:`GraphError` if it has a cycle or dangling edge."""
    cache_key = (cost.memory_weight, cost.h2d_bandwidth_gbps)
    cached = getattr(dag, "_workgraph", None)
    if cached is not None and cached[0] == cache_key:
        return cached[1]
    ids = sorted(dag.nodes)
    index = {node_id: i for i, node_id in enumerate(ids)}
    n = len(ids)
    weight: list[float] = []
    is_call: list[bool] = []
    for node_id in ids:
        node = dag.nodes[node_id]
        call = node.kind == "call"
        is_call.append(call)
        nbytes = node.mem_bytes if call else node.nbytes
        weight.append(cost.node_weight(node.self_ns, nbytes))
    try:
        src = np.fromiter((index[s] for s, _, _ in dag.edges), dtype=np.int64, count=len(dag.edges))
        dst = np.fromiter((index[d] for _, d, _ in dag.edges), dtype=np.int64, count=len(dag.edges))
    except KeyError as error:
        raise GraphError(f"an edge names node {error.args[0]}, which is absent") from None
    if src.size:
        pairs = _unique(src * max(n, 1) + dst)
        src, dst = pairs // max(n, 1), pairs % max(n, 1)
    if np.any(src == dst):
        raise GraphError(
            f"node {ids[int(src[src == dst][0])]} has an edge to itself; expected a DAG"
        )
    succ_ptr, succ = _csr(n, src, dst)
    pred_ptr, pred = _csr(n, dst, src)
    und_ptr, und = _csr(n, np.concatenate([src, dst]), np.concatenate([dst, src]))
    if src.size == 0 or bool(np.all(src < dst)):
        topo = list(range(n))
    else:
        graph = rx.PyDiGraph()
        graph.add_nodes_from(range(n))
        graph.add_edges_from_no_data(list(zip(src.tolist(), dst.tolist())))
        try:
            topo = list(rx.topological_sort(graph))
        except rx.DAGHasCycle as error:
            raise GraphError("the DAG has a cycle; expected an acyclic graph") from error
    sp, sl = succ_ptr.tolist(), succ.tolist()
    hops = [0] * n
    for v in topo:
        hv = hops[v] + 1
        for j in range(sp[v], sp[v + 1]):
            u = sl[j]
            if hops[u] < hv:
                hops[u] = hv
    graph_view = WorkGraph(
        ids=ids,
        index=index,
        weight=weight,
        is_call=is_call,
        succ_ptr=sp,
        succ=sl,
        pred_ptr=pred_ptr.tolist(),
        pred=pred.tolist(),
        und_ptr=und_ptr,
        und=und,
        topo=topo,
        longest_path_hops=max(hops, default=0),
    )
    dag._workgraph = (cache_key, graph_view)  # type: ignore[attr-defined]
    return graph_view

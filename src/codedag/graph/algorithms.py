"""Graph algorithms on any :class:`~codedag.graph.interface.DAGView`, through rustworkx.

rustworkx indexes nodes 0..n-1; :func:`to_rustworkx` maps DAG ids to those indices and stores each
DAG id as the node payload, so results translate back cheaply. Exact diameters are O(n*m) and are
deliberately absent: use :func:`longest_path` and :func:`bfs_distances` from a few sources.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

import rustworkx as rx

from codedag.errors import GraphError
from codedag.graph.interface import DAGView
from codedag.graph.nodes import Node

Weight = str | Callable[["Node"], float]


def to_rustworkx(
    dag: DAGView, kinds: Iterable[str] | None = None
) -> tuple[rx.PyDiGraph, dict[int, int]]:
    """Build a ``PyDiGraph`` whose payloads are DAG ids; return it and ``{dag id: index}``.

    Args:
        dag: the execution DAG.
        kinds: edge kinds to include (all when None). Edges with a missing endpoint are skipped.
    """
    graph = rx.PyDiGraph(check_cycle=False, multigraph=True)
    ids = list(dag.nodes)
    indices = graph.add_nodes_from(ids)
    index_of = dict(zip(ids, indices))
    wanted = None if kinds is None else frozenset(kinds)
    edge_list = [
        (index_of[s], index_of[d], k)
        for s, d, k in dag.edges
        if (wanted is None or k in wanted) and s in index_of and d in index_of
    ]
    graph.add_edges_from(edge_list)
    return graph, index_of


def find_cycle(dag: DAGView) -> list[int]:
    """DAG ids along one cycle (first id repeated at the end), or ``[]`` when acyclic."""
    graph, _ = to_rustworkx(dag)
    if rx.is_directed_acyclic_graph(graph):
        return []
    edges = rx.digraph_find_cycle(graph)
    if not edges:
        return []
    return [graph[edges[0][0]]] + [graph[v] for _, v in edges]


def topological_order(dag: DAGView, kinds: Iterable[str] | None = None) -> list[int]:
    """DAG ids in a topological order; raise :class:`GraphError` on a cycle."""
    graph, _ = to_rustworkx(dag, kinds)
    try:
        order = rx.topological_sort(graph)
    except rx.DAGHasCycle as error:
        raise GraphError(f"execution DAG has a cycle: {find_cycle(dag)}") from error
    return [graph[i] for i in order]


def topological_ranks(dag: DAGView, kinds: Iterable[str] | None = None) -> dict[int, int]:
    """``{id: layer}``: 0 for nodes without predecessors, else 1 + the max layer of those."""
    graph, _ = to_rustworkx(dag, kinds)
    try:
        generations = rx.topological_generations(graph)
    except rx.DAGHasCycle as error:
        raise GraphError(f"execution DAG has a cycle: {find_cycle(dag)}") from error
    return {graph[i]: rank for rank, layer in enumerate(generations) for i in layer}


def _weight_fn(weight: Weight) -> Callable[[Node], float]:
    if callable(weight):
        return weight
    name = weight
    return lambda node: float(getattr(node, name, 0) or 0)


def longest_path(
    dag: DAGView, weight: Weight = "self_ns", kinds: Iterable[str] | None = None
) -> tuple[float, list[int]]:
    """The path with the largest sum of node weights: ``(length, [ids])``.

    Args:
        dag: an acyclic execution DAG.
        weight: a node attribute name (missing attributes count 0, e.g. ``self_ns`` on values)
            or a function of the node.
        kinds: edge kinds to follow (all when None).
    """
    if not dag.nodes:
        return 0.0, []
    fn = _weight_fn(weight)
    graph, index_of = to_rustworkx(dag, kinds)
    node_w = [fn(dag.nodes[graph[i]]) for i in range(len(index_of))]
    if any(w < 0 for w in node_w):
        raise GraphError("longest_path needs non-negative node weights")
    # A super-source with an edge of weight w(v) into every node turns node weights into edge
    # weights: the length of a path from the source is the sum of the weights of its nodes.
    source = graph.add_node(-1)
    graph.add_edges_from_no_data([(source, i) for i in range(len(index_of))])
    try:
        path = rx.dag_weighted_longest_path(graph, lambda _u, v, _e: node_w[v])
    except rx.DAGHasCycle as error:
        raise GraphError(f"execution DAG has a cycle: {find_cycle(dag)}") from error
    ids = [graph[i] for i in path if i != source]
    return float(sum(fn(dag.nodes[i]) for i in ids)), ids


def bfs_distances(
    dag: DAGView,
    sources: Iterable[int],
    undirected: bool = True,
    kinds: Iterable[str] | None = None,
) -> dict[int, int]:
    """Hop distance from the nearest of ``sources`` to every reachable node (sources: 0)."""
    graph, index_of = to_rustworkx(dag, kinds)
    starts = []
    for s in sources:
        if s not in index_of:
            raise GraphError(f"BFS source {s} is not a node of the DAG")
        starts.append(index_of[s])
    if not starts:
        return {}
    if undirected:
        layers = rx.bfs_layers(graph.to_undirected(multigraph=False), starts)
    else:
        layers = rx.bfs_layers(graph, starts)
    return {graph[i]: dist for dist, layer in enumerate(layers) for i in layer}


def dataflow_edges(dag: DAGView) -> list[tuple[int, int, int]]:
    """``(producer call, consumer call, value)`` for every ``produces`` + ``uses`` pair."""
    out: list[tuple[int, int, int]] = []
    for src, value_id, kind in dag.edges:
        if kind == "produces":
            out.extend((src, consumer, value_id) for consumer in dag.successors(value_id, "uses"))
    return out


def weakly_connected_components(dag: DAGView) -> list[set[int]]:
    """Sets of DAG ids connected when edge directions are ignored, largest first."""
    graph, _ = to_rustworkx(dag)
    comps = [{graph[i] for i in c} for c in rx.weakly_connected_components(graph)]
    return sorted(comps, key=len, reverse=True)

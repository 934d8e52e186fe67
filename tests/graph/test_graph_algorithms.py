"""Graph algorithms through rustworkx."""

from __future__ import annotations

import pytest

from codedag.errors import GraphError
from codedag.graph import ExecutionDAG
from codedag.graph.algorithms import (
    bfs_distances,
    dataflow_edges,
    find_cycle,
    longest_path,
    topological_order,
    topological_ranks,
    weakly_connected_components,
)


def diamond() -> ExecutionDAG:
    """a -> v1 -> b, a -> v2 -> c, b -> v3 -> d, c -> v4 -> d; c is slow."""
    dag = ExecutionDAG()
    a = dag.add_call(name="a", self_ns=1, total_ns=1)
    b = dag.add_call(name="b", self_ns=2, total_ns=2)
    c = dag.add_call(name="c", self_ns=10, total_ns=10)
    d = dag.add_call(name="d", self_ns=1, total_ns=1)
    for src, dst in ((a, b), (a, c), (b, d), (c, d)):
        v = dag.add_value(name="v", nbytes=5)
        dag.add_edge(src, v, "produces")
        dag.add_edge(v, dst, "uses")
    return dag


def test_topological_order_and_ranks() -> None:
    dag = diamond()
    order = topological_order(dag)
    pos = {n: i for i, n in enumerate(order)}
    assert all(pos[s] < pos[d] for s, d, _ in dag.edges)
    ranks = topological_ranks(dag)
    assert ranks[0] == 0 and ranks[3] == 4
    assert ranks[1] == ranks[2] == 2


def test_longest_path_follows_node_weights() -> None:
    dag = diamond()
    length, path = longest_path(dag, "self_ns")
    names = [dag.nodes[i].name for i in path]
    assert names == ["a", "v", "c", "v", "d"]
    assert length == 12.0
    length, path = longest_path(dag, lambda n: getattr(n, "nbytes", 0))
    assert length == 10.0 and len(path) == 5
    assert longest_path(ExecutionDAG()) == (0.0, [])


def test_bfs_distances_and_dataflow() -> None:
    dag = diamond()
    assert bfs_distances(dag, [3], undirected=False) == {3: 0}
    dist = bfs_distances(dag, [3])
    assert dist[0] == 4 and dist[1] == 2 and dist[3] == 0
    assert bfs_distances(dag, [0, 3])[1] == 2
    with pytest.raises(GraphError):
        bfs_distances(dag, [42])
    assert sorted((p, c) for p, c, _ in dataflow_edges(dag)) == [(0, 1), (0, 2), (1, 3), (2, 3)]
    assert len(weakly_connected_components(dag)) == 1


def test_cycles_are_reported() -> None:
    dag = diamond()
    assert find_cycle(dag) == []
    dag.add_edge(3, 0, "calls")
    cycle = find_cycle(dag)
    assert cycle[0] == cycle[-1] and 3 in cycle
    with pytest.raises(GraphError, match="cycle"):
        topological_order(dag)
    with pytest.raises(GraphError, match="cycle"):
        longest_path(dag)

"""The coarsened DAG's node records and graph queries."""

from __future__ import annotations

from optimize_helpers import add_call, add_value

from codedag.graph.model import ExecutionDAG
from codedag.optimize.coarse import COARSE_SCHEMA_VERSION, Cluster, ClusterNode, CoarsenedDAG


def _dag() -> ExecutionDAG:
    dag = ExecutionDAG()
    root = add_call(dag, "pkg.root", None, "root", 500, 0)
    a = add_call(dag, "pkg.a", root, "root/pkg.a#0", 200, 1)
    value = add_value(dag, a, 64)
    b = add_call(dag, "pkg.b", root, "root/pkg.b#0", 100, 1)
    dag.add_edge(value, b, "uses")
    dag.add_edge(value, b, "uses")  # a duplicate the coarse view drops
    return dag


def test_identity_keeps_every_node_with_its_own_sums() -> None:
    dag = _dag()
    coarse = CoarsenedDAG.identity(dag)
    assert len(coarse) == len(dag) == 4
    assert coarse.stats == {"original_nodes": 4}
    a = coarse.nodes[1]
    assert (a.kind, a.name, a.instance_count, a.original_ids) == ("call", "pkg.a", 1, [1])
    assert (a.depth, a.total_ns, a.self_ns, a.nbytes) == (1, 200, 200, 0)
    value = coarse.nodes[2]
    assert (value.kind, value.nbytes, value.depth, value.total_ns) == ("value", 64, 0, 0)
    assert [n.id for n in coarse.calls()] == [0, 1, 3]
    assert [n.id for n in coarse.values()] == [2]


def test_identity_drops_duplicate_edges_and_answers_neighbour_queries() -> None:
    coarse = CoarsenedDAG.identity(_dag())
    assert coarse.edges.count((2, 3, "uses")) == 1
    assert coarse.successors(0) == [1, 3]
    assert coarse.successors(1, "produces") == [2]
    assert coarse.successors(1, "calls") == []
    assert coarse.predecessors(3) == [0, 2]
    assert coarse.predecessors(3, "uses") == [2]
    assert coarse.predecessors(0) == []


def test_context_keys_follow_the_original_ids() -> None:
    dag = _dag()
    coarse = CoarsenedDAG.identity(dag)
    coarse.nodes[1].original_ids = [1, 3]
    assert coarse.context_keys(1) == ["root/pkg.a#0", "root/pkg.b#0"]


def test_node_performance_and_type_depend_on_kind() -> None:
    call = ClusterNode(7, "call", "f", 2, [7, 9], 7, total_ns=3_000_000_000, self_ns=1_000_000_000)
    call.mem_bytes, call.nbytes = 10, 99
    assert call.node_type == "function_call"
    assert call.performance == {"execution_time": 3.0, "self_time": 1.0, "memory_bytes": 10}
    value = ClusterNode(8, "value", "v", 1, [8], 8, mem_bytes=10, nbytes=99)
    assert value.node_type == "variable"
    assert value.performance["memory_bytes"] == 99


def test_to_dict_carries_schema_nodes_edges_and_clusters() -> None:
    coarse = CoarsenedDAG.identity(_dag())
    coarse.clusters[0] = Cluster(0, "pkg.a", 1, 3, [1, 2])
    data = coarse.to_dict()
    assert data["schema_version"] == COARSE_SCHEMA_VERSION
    assert data["statistics"] == {"original_nodes": 4}
    assert [n["id"] for n in data["nodes"]] == [0, 1, 2, 3]
    assert data["nodes"][1]["original_ids"] == [1]
    assert [0, 1, "calls"] in data["edges"]
    assert data["clusters"] == [
        {"id": 0, "anchor_name": "pkg.a", "anchor_id": 1, "instance_count": 3, "node_ids": [1, 2]}
    ]
    assert repr(coarse) == f"CoarsenedDAG(nodes=4, edges={len(coarse.edges)}, clusters=1)"

"""The index-based work graph: weights, adjacency, topological order and BFS."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from codedag.errors import GraphError
from codedag.graph.model import ExecutionDAG
from codedag.optimize.coarse import ClusterNode, CoarsenedDAG
from codedag.optimize.costs import CostModel
from codedag.optimize.workgraph import _unique, build_workgraph


def _coarse(ids: list[int], edges: list[tuple[int, int, str]]) -> CoarsenedDAG:
    nodes = {i: ClusterNode(i, "call", f"f{i}", 1, [i], i, self_ns=1000 * (i + 1)) for i in ids}
    return CoarsenedDAG(nodes, edges, {}, ExecutionDAG())


def test_ids_are_renumbered_densely_with_deduplicated_csr() -> None:
    dag = _coarse([10, 20, 30], [(10, 20, "calls"), (10, 20, "uses"), (10, 30, "calls")])
    graph = build_workgraph(dag, CostModel())
    assert graph.n == 3
    assert graph.ids == [10, 20, 30] and graph.index == {10: 0, 20: 1, 30: 2}
    assert graph.succ_ptr == [0, 2, 2, 2] and graph.succ == [1, 2]
    assert graph.pred_ptr == [0, 0, 1, 2] and graph.pred == [0, 0]
    assert graph.topo == [0, 1, 2]
    assert graph.longest_path_hops == 1
    assert graph.is_call == [True, True, True]


def test_weight_adds_the_memory_term_of_values() -> None:
    nodes = {
        0: ClusterNode(0, "call", "f", 1, [0], 0, self_ns=5000),
        1: ClusterNode(1, "value", "v", 1, [1], 1, nbytes=25_000),
    }
    cost = CostModel(memory_weight=1.0, h2d_bandwidth_gbps=25.0)
    graph = build_workgraph(CoarsenedDAG(nodes, [(0, 1, "produces")], {}, ExecutionDAG()), cost)
    assert graph.is_call == [True, False]
    assert graph.weight[0] == cost.node_weight(5000, 0)
    assert graph.weight[1] == cost.node_weight(0, 25_000) > 0


def test_edges_against_id_order_get_a_real_topological_order() -> None:
    dag = _coarse([0, 1, 2, 3], [(3, 2, "calls"), (2, 1, "calls"), (1, 0, "calls")])
    graph = build_workgraph(dag, CostModel())
    assert graph.topo == [3, 2, 1, 0]
    assert graph.longest_path_hops == 3


def test_the_graph_is_cached_per_cost_setting() -> None:
    dag = _coarse([0, 1], [(0, 1, "calls")])
    first = build_workgraph(dag, CostModel())
    assert build_workgraph(dag, CostModel()) is first
    assert build_workgraph(dag, CostModel(memory_weight=0.5)) is not first


@pytest.mark.parametrize(
    ("edges", "message"),
    [
        ([(0, 5, "calls")], "node 5, which is absent"),
        ([(1, 1, "calls")], "node 1 has an edge to itself"),
        ([(0, 1, "calls"), (1, 0, "calls")], "has a cycle"),
    ],
)
def test_malformed_graphs_are_rejected(edges: list[tuple[int, int, str]], message: str) -> None:
    with pytest.raises(GraphError, match=message):
        build_workgraph(_coarse([0, 1], edges), CostModel())


def test_bfs_counts_undirected_hops_and_marks_unreachable() -> None:
    # 0 -> 1 -> 2, 3 -> 2, and 4 alone
    dag = _coarse([0, 1, 2, 3, 4], [(0, 1, "calls"), (1, 2, "calls"), (3, 2, "calls")])
    graph = build_workgraph(dag, CostModel())
    assert graph.bfs([0]).tolist() == [0, 1, 2, 3, -1]
    assert graph.bfs([3, 0]).tolist() == [0, 1, 1, 0, -1]
    assert graph.bfs([4]).tolist() == [-1, -1, -1, -1, 0]
    assert np.array_equal(graph.bfs([]), np.full(5, -1))


@pytest.mark.parametrize(
    "values", [[], [7], [3, 3], [5, -1, 5, 2, 2, 9, -1], list(range(50, 0, -3)) * 2]
)
def test_unique_matches_numpy(values: list[int]) -> None:
    array = np.asarray(values, dtype=np.int64)
    got = _unique(array)
    assert got.dtype == np.int64
    assert got.tolist() == np.unique(array).tolist()


def test_building_and_searching_a_graph_leaves_numpy_ma_unimported() -> None:
    code = (
        "import sys\n"
        "from codedag.graph.model import ExecutionDAG\n"
        "from codedag.optimize.coarse import ClusterNode, CoarsenedDAG\n"
        "from codedag.optimize.costs import CostModel\n"
        "from codedag.optimize.workgraph import build_workgraph\n"
        "nodes = {i: ClusterNode(i, 'call', 'f', 1, [i], i) for i in range(3)}\n"
        "edges = [(0, 1, 'calls'), (0, 1, 'uses'), (2, 1, 'calls')]\n"
        "graph = build_workgraph(CoarsenedDAG(nodes, edges, {}, ExecutionDAG()), CostModel())\n"
        "assert graph.bfs([0, 0]).tolist() == [0, 1, 2]\n"
        "print('numpy.ma' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"

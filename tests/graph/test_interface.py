"""The DAG read interface: any object with nodes, typed edges and neighbours serves the graph
algorithms, not only the traced ExecutionDAG."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from codedag.graph.algorithms import find_cycle, topological_order
from codedag.graph.interface import DAGView
from codedag.graph.model import ExecutionDAG
from codedag.graph.nodes import CallNode, Edge, Node, ValueNode


class TinyDAG:
    """A DAGView that is not an ExecutionDAG (as the optimizer's coarsened graph is not)."""

    def __init__(self, nodes: list[Node], edges: list[Edge]) -> None:
        self._nodes = {n.id: n for n in nodes}
        self._edges = edges

    @property
    def nodes(self) -> Mapping[int, Node]:
        return self._nodes

    @property
    def edges(self) -> Sequence[Edge]:
        return self._edges

    def successors(self, node_id: int, kind: str | None = None) -> list[int]:
        return [d for s, d, k in self._edges if s == node_id and kind in (None, k)]

    def predecessors(self, node_id: int, kind: str | None = None) -> list[int]:
        return [s for s, d, k in self._edges if d == node_id and kind in (None, k)]


def _order(dag: DAGView) -> list[int]:
    return topological_order(dag, kinds=("uses", "produces"))


def test_algorithms_run_on_any_dag_view() -> None:
    tiny = TinyDAG(
        [ValueNode(1, "x"), CallNode(2, "numpy.flip"), ValueNode(3, "y")],
        [(1, 2, "uses"), (2, 3, "produces")],
    )
    assert _order(tiny) == [1, 2, 3]
    assert find_cycle(tiny) == []
    tiny._edges.append((3, 1, "uses"))
    assert sorted(find_cycle(tiny)[:-1]) == [1, 2, 3]


def test_the_execution_dag_and_another_view_give_the_same_answers() -> None:
    dag = ExecutionDAG()
    x = dag.add_value(name="x")
    f = dag.add_call(name="numpy.flip")
    y = dag.add_value(name="y")
    dag.add_edge(x, f, "uses")
    dag.add_edge(f, y, "produces")
    tiny = TinyDAG(list(dag.nodes.values()), list(dag.edges))
    views: list[DAGView] = [dag, tiny]
    for view in views:
        assert _order(view) == [x, f, y]
        assert view.successors(f, "produces") == [y] and view.predecessors(f) == [x]
        assert view.successors(f, "uses") == []

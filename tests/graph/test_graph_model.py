"""ExecutionDAG: building, queries, self_check and the JSON round trip."""

from __future__ import annotations

import json

import pytest

from codedag.errors import GraphError, SchemaError
from codedag.graph import SCHEMA_VERSION, CallNode, ExecutionDAG, ValueNode


def chain_dag() -> ExecutionDAG:
    """root calls resize and cvtColor; resize's output feeds cvtColor."""
    dag = ExecutionDAG(metadata={"target": "demo"})
    root = dag.add_call(name="pkg.pipeline", context_key="pkg.pipeline#0", total_ns=100, self_ns=40)
    img = dag.add_value(
        name="ndarray", type_name="numpy.ndarray", shape=[8, 8, 3], dtype="uint8", nbytes=192
    )
    resize = dag.add_call(
        name="cv2.resize",
        context_key="pkg.pipeline#0/cv2.resize#0",
        depth=1,
        total_ns=30,
        self_ns=30,
        is_builtin=True,
        arg_summaries=["ndarray(8,8,3)"],
        return_summary="ndarray(4,4,3)",
        mem_bytes=48,
        call_site="a.py:3",
    )
    small = dag.add_value(name="ndarray", version=0, shape=[4, 4, 3], dtype="uint8", nbytes=48)
    cvt = dag.add_call(
        name="cv2.cvtColor",
        context_key="pkg.pipeline#0/cv2.cvtColor#0",
        depth=1,
        total_ns=30,
        self_ns=30,
        is_builtin=True,
    )
    dag.add_edge(root, resize, "calls")
    dag.add_edge(root, cvt, "calls")
    dag.add_edge(img, resize, "uses")
    dag.add_edge(resize, small, "produces")
    dag.add_edge(small, cvt, "uses")
    return dag


def test_ids_queries_and_seed_properties() -> None:
    dag = chain_dag()
    assert list(dag.nodes) == [0, 1, 2, 3, 4]
    assert [c.name for c in dag.calls()] == ["pkg.pipeline", "cv2.resize", "cv2.cvtColor"]
    assert all(isinstance(v, ValueNode) for v in dag.values())
    assert dag.successors(0, "calls") == [2, 4]
    assert dag.predecessors(4) == [0, 3]
    assert dag.predecessors(4, "uses") == [3]
    assert dag.dataflow_successors(2) == [4]
    node = dag.nodes[2]
    assert isinstance(node, CallNode) and node.node_type == "function_call"
    assert node.performance == {"execution_time": 30e-9, "self_time": 30e-9, "memory_bytes": 48}
    assert dag.nodes[1].node_type == "variable"
    assert dag.stats()["edges_uses"] == 2
    # the adjacency index follows later appends
    extra = dag.add_call(name="x", depth=1)
    dag.add_edge(0, extra, "calls")
    assert dag.successors(0, "calls") == [2, 4, extra]
    dag.self_check()


def test_explicit_ids_and_bad_edges() -> None:
    dag = ExecutionDAG()
    assert dag.add_call(id=10, name="f") == 10
    assert dag.add_value(name="v") == 11
    with pytest.raises(GraphError, match="already exists"):
        dag.add_call(id=10, name="g")
    with pytest.raises(GraphError, match="unknown"):
        dag.add_edge(10, 11, "flows")


def test_json_round_trip_is_lossless(tmp_path) -> None:
    dag = chain_dag()
    again = ExecutionDAG.from_dict(json.loads(json.dumps(dag.to_dict())))
    assert again.to_dict() == dag.to_dict()
    assert again.nodes == dag.nodes and again.edges == dag.edges
    assert again.metadata == {"target": "demo"}
    for name in ("dag.json", "dag.json.gz"):
        dag.save(tmp_path / name)
        loaded = ExecutionDAG.load(tmp_path / name)
        assert loaded.to_dict() == dag.to_dict()
    assert loaded.add_call(name="next") == 5  # ids continue after the loaded ones
    assert json.loads((tmp_path / "dag.json").read_text())["schema_version"] == SCHEMA_VERSION


def test_from_dict_rejects_bad_input_and_newer_versions() -> None:
    good = chain_dag().to_dict()
    with pytest.raises(SchemaError, match="newer"):
        ExecutionDAG.from_dict({**good, "schema_version": SCHEMA_VERSION + 1})
    with pytest.raises(SchemaError, match="schema_version"):
        ExecutionDAG.from_dict({"nodes": []})
    with pytest.raises(SchemaError, match="JSON object"):
        ExecutionDAG.from_dict([1, 2])
    bad = json.loads(json.dumps(good))
    bad["nodes"][1]["nbytes"] = "lots"
    bad["nodes"][2]["kind"] = "blob"
    bad["edges"].append([0, 1, "sideways"])
    with pytest.raises(SchemaError) as info:
        ExecutionDAG.from_dict(bad)
    text = str(info.value)
    assert "nodes[1]: field 'nbytes' is str" in text
    assert "nodes[2]: kind 'blob'" in text
    assert "edges[5]" in text


def test_older_files_load_with_defaults() -> None:
    old = {
        "schema_version": 1,
        "nodes": [{"id": 0, "kind": "call", "name": "f"}, {"id": 1, "kind": "value", "name": "v"}],
        "edges": [[0, 1, "produces"]],
    }
    dag = ExecutionDAG.from_dict(old)
    assert dag.nodes[0] == CallNode(id=0, name="f")
    assert dag.nodes[1].device == "cpu"
    dag.self_check()


def test_self_check_lists_every_problem(tmp_path) -> None:
    dag = chain_dag()
    dag.nodes[2].total_ns = 500  # child slower than its caller
    dag.nodes[4].self_ns = -1
    dag.add_edge(3, 99, "uses")  # dangling
    dag.add_edge(4, 1, "produces")
    dag.add_edge(1, 4, "produces")  # wrong endpoint kinds
    dag.add_edge(4, 0, "calls")  # makes a cycle 0 -> 4 -> 0
    with pytest.raises(GraphError) as info:
        dag.self_check()
    text = str(info.value)
    assert "more than its caller" in text
    assert "negative time" in text
    assert "dangling edge (3, 99, uses)" in text
    assert "joins value -> call" in text
    assert "cycle through nodes" in text


def test_nodes_are_fetched_by_their_type() -> None:
    dag = ExecutionDAG()
    call = dag.add_call(name="cv2.resize")
    value = dag.add_value(name="v")
    assert isinstance(dag.call(call), CallNode) and isinstance(dag.value(value), ValueNode)
    assert [n.id for n in dag.calls()] == [call] and [n.id for n in dag.values()] == [value]
    with pytest.raises(GraphError, match="not a call"):
        dag.call(value)
    with pytest.raises(GraphError, match="not a value"):
        dag.value(call)
    with pytest.raises(GraphError, match="not a call"):
        dag.call(99)

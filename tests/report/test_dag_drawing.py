"""The trace's drawing: node by node when small, coarsened when Graphviz would take too long."""

from __future__ import annotations

import shutil
import time

import pytest
from optimize_helpers import add_call, add_value

from codedag.graph.model import ExecutionDAG
from codedag.optimize.coarsen import GraphCoarsening
from codedag.report.dag_drawing import choose_drawing, outer_calls_drawing
from codedag.trace.dot import render_svg, to_dot


def batch_dag(samples: int, steps: int = 5) -> ExecutionDAG:
    """A batch: ``samples`` identical ``__getitem__`` calls, each a chain of ``steps`` calls
    (each step uses the previous step's array), then a collate using every sample's output."""
    dag = ExecutionDAG()
    root = add_call(dag, "torch.utils.data.DataLoader.__next__", None, "root", 1000, 0)
    outputs = []
    for s in range(samples):
        item = add_call(dag, "pkg.Dataset.__getitem__", root, f"root/item#{s}", 100, 1)
        previous = None
        for k in range(steps):
            step = add_call(dag, f"cv2.step{k}", item, f"root/item#{s}/step{k}", 10, 2)
            if previous is not None:
                dag.add_edge(previous, step, "uses")
            previous = add_value(dag, step, 64)
        outputs.append(previous)
    collate = add_call(dag, "pkg.collate", root, "root/collate", 50, 1)
    for value in outputs:
        dag.add_edge(value, collate, "uses")
    return dag


def test_a_small_dag_is_drawn_node_by_node() -> None:
    dag = batch_dag(3)
    drawing = choose_drawing(dag, max_nodes=len(dag.nodes))
    assert not drawing.coarsened
    assert drawing.nodes == drawing.dag_nodes == len(dag.nodes)
    assert drawing.dot_text == to_dot(dag, max_nodes=len(dag.nodes))


def test_a_large_dag_is_drawn_coarsened_with_every_sample_in_one_node() -> None:
    dag = batch_dag(200)  # 2,203 nodes
    drawing = choose_drawing(dag, max_nodes=150)
    assert drawing.coarsened and drawing.dag_nodes == len(dag.nodes)
    assert drawing.shows == "the coarsened DAG (repeated subgraphs merged)"
    assert drawing.nodes <= 150
    assert drawing.dot_text.count(" [label=") == drawing.nodes
    assert "pkg.Dataset.__getitem__ x200" in drawing.dot_text
    assert "cv2.step4 x200" in drawing.dot_text
    assert f"for {len(dag.nodes)}" in drawing.dot_text  # the title says it is coarsened


def test_when_the_coarsened_dag_is_too_large_its_outer_calls_are_drawn() -> None:
    dag = batch_dag(200)
    coarse_nodes = len(GraphCoarsening().coarsen(dag).nodes)
    drawing = choose_drawing(dag, max_nodes=coarse_nodes - 1)
    assert drawing.coarsened
    assert drawing.shows == "the coarsened DAG's calls down to depth 2"
    assert drawing.nodes == 8  # root, __getitem__, 5 steps, collate: no values
    drawing = choose_drawing(dag, max_nodes=7)
    assert drawing.shows == "the coarsened DAG's calls down to depth 1"
    assert drawing.nodes == 3
    assert "+5 calls" in drawing.dot_text  # __getitem__ stands for its steps
    # the last step's value reaches collate: a data edge between the calls drawn
    ids = {name: node_id for node_id, name in _labels(drawing.dot_text).items()}
    item, collate = ids["pkg.Dataset.__getitem__ x200"], ids["pkg.collate"]
    assert f"n{item} -> n{collate} [" in drawing.dot_text


def test_too_many_outermost_calls_are_cut_to_the_first_ones() -> None:
    dag = ExecutionDAG()
    for k in range(10):
        add_call(dag, f"pkg.top{k}", None, f"top{k}", 10, 0)
    drawing = outer_calls_drawing(GraphCoarsening().coarsen(dag), 4)
    assert drawing.nodes == 4
    assert drawing.shows == "the first 4 of the coarsened DAG's 10 calls at depth 0"


def _labels(dot_text: str) -> dict[int, str]:
    """Node id -> first label line, from DOT text."""
    out = {}
    for line in dot_text.splitlines():
        line = line.strip()
        if line.startswith("n") and " [label=" in line:
            node, rest = line.split(" [label=", 1)
            out[int(node[1:])] = rest.split('"')[1].split("\\n")[0]
    return out


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz's dot is not installed")
def test_graphviz_draws_the_coarsened_drawing_of_a_large_dag_quickly() -> None:
    dag = batch_dag(1000)  # 11,003 nodes: dot would take hours node by node
    drawing = choose_drawing(dag)
    start = time.perf_counter()
    svg = render_svg(drawing.dot_text, timeout_s=60)
    assert svg is not None, "dot gave no SVG"
    assert time.perf_counter() - start < 60
    text = svg.decode()
    assert text.lstrip().startswith(("<?xml", "<svg"))
    assert "pkg.Dataset.__getitem__ x1000" in text

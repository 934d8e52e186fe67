"""Coarsening: totals preserved, per-sample merge, exact isomorphism (no hash collisions)."""

from __future__ import annotations

import pytest
from optimize_helpers import add_call, wired_subgraph

from codedag.errors import GraphError
from codedag.graph.model import ExecutionDAG
from codedag.optimize.coarsen import GraphCoarsening, normalize_name
from codedag.optimize.synthetic import GETITEM, trace_shaped_dag


def test_normalize_name_drops_instance_and_line_suffixes() -> None:
    assert normalize_name("cv2.resize#3") == "cv2.resize"
    assert normalize_name("pkg.f:42") == "pkg.f"
    assert normalize_name("numpy.clip") == "numpy.clip"


@pytest.mark.parametrize("n_nodes", [300, 3000])
def test_coarsening_preserves_total_time_memory_and_bytes(n_nodes: int) -> None:
    dag = trace_shaped_dag(n_nodes, batch_size=16, seed=3)
    coarse = GraphCoarsening().coarsen(dag)
    assert len(coarse.nodes) < len(dag.nodes)
    for field in ("self_ns", "total_ns", "mem_bytes"):
        assert sum(getattr(n, field) for n in coarse.calls()) == sum(
            getattr(n, field) for n in dag.calls()
        )
    assert sum(n.nbytes for n in coarse.values()) == sum(n.nbytes for n in dag.values())
    covered = sorted(i for n in coarse.nodes.values() for i in n.original_ids)
    assert covered == sorted(dag.nodes)  # every original node in exactly one cluster node
    for node in coarse.nodes.values():
        assert node.instance_count == len(node.original_ids)
        assert node.representative_id in node.original_ids


def test_per_sample_work_of_a_batch_becomes_one_cluster_of_b_instances() -> None:
    batch = 24
    dag = trace_shaped_dag(1, batch_size=batch, flip_prob=0.0)  # one batch, identical samples
    coarse = GraphCoarsening().coarsen(dag)
    getitems = [n for n in coarse.calls() if n.name == GETITEM]
    assert len(getitems) == 1 and getitems[0].instance_count == batch
    cluster = coarse.clusters[getitems[0].cluster_id]  # type: ignore[index]
    assert cluster.instance_count == batch and cluster.anchor_id == getitems[0].id
    resize = [n for n in coarse.calls() if n.name == "cv2.resize"]
    assert len(resize) == 1 and resize[0].instance_count == batch
    assert resize[0].id in cluster.node_ids
    # the tracer's context keys of all B samples are kept on the cluster node
    keys = coarse.context_keys(resize[0].id)
    assert len(set(keys)) == batch and all(k.endswith("cv2.resize#0") for k in keys)


def test_structural_variants_form_separate_clusters_that_sum_to_b() -> None:
    batch = 32
    dag = trace_shaped_dag(1, batch_size=batch, flip_prob=0.5, seed=1)
    coarse = GraphCoarsening().coarsen(dag)
    getitems = [n for n in coarse.calls() if n.name == GETITEM]
    flips = sum(1 for n in dag.calls() if n.name == "cv2.flip")
    assert 0 < flips < batch
    assert sorted(n.instance_count for n in getitems) == sorted([flips, batch - flips])


def test_differently_wired_subgraphs_with_the_same_names_are_not_merged() -> None:
    dag = ExecutionDAG()
    root = add_call(dag, "pkg.main", None, "pkg.main#0", 1000, 0)
    for i in range(3):
        wired_subgraph(dag, root, f"pkg.main#0/pkg.f#{i}", "chain")
    for i in range(3, 6):
        wired_subgraph(dag, root, f"pkg.main#0/pkg.f#{i}", "fork")
    coarsening = GraphCoarsening()
    coarse = coarsening.coarsen(dag)
    fs = sorted(n.instance_count for n in coarse.calls() if n.name == "pkg.f")
    assert fs == [3, 3]  # chains with chains, forks with forks, never a chain with a fork

    def wiring(f_id: int) -> str:
        (c,) = [i for i in dag.successors(f_id, "calls") if dag.nodes[i].name == "pkg.c"]
        (value,) = dag.predecessors(c, "uses")
        return dag.nodes[dag.predecessors(value, "produces")[0]].name

    for node in coarse.calls():
        if node.name == "pkg.f":
            assert len({wiring(i) for i in node.original_ids}) == 1
    assert coarsening.stats["hash_collisions_rejected"] >= 1  # same hash, VF2 said no


def test_an_edge_between_two_instances_undoes_the_merge_instead_of_making_a_cycle() -> None:
    dag = ExecutionDAG()
    root = add_call(dag, "pkg.main", None, "pkg.main#0", 1000, 0)
    previous = None
    for i in range(3):
        step = add_call(dag, "pkg.step", root, f"pkg.main#0/pkg.step#{i}", 10, 1)
        state = dag.add_value(name="state", nbytes=8)
        dag.add_edge(step, state, "produces")
        if previous is not None:
            dag.add_edge(previous, step, "uses")
        previous = state
    coarse = GraphCoarsening().coarsen(dag)
    assert coarse.stats["merges_undone_for_cycles"] >= 1
    assert len(coarse.nodes) == len(dag.nodes)


def test_cyclic_or_dangling_input_is_one_clear_error() -> None:
    dag = ExecutionDAG()
    a = add_call(dag, "pkg.a", None, "pkg.a#0", 1, 0)
    b = add_call(dag, "pkg.b", a, "pkg.a#0/pkg.b#0", 1, 1)
    dag.add_edge(b, a, "calls")
    with pytest.raises(GraphError, match="cycl"):
        GraphCoarsening().coarsen(dag)
    dangling = ExecutionDAG()
    add_call(dangling, "pkg.a", None, "pkg.a#0", 1, 0)
    dangling.edges.append((0, 99, "calls"))
    with pytest.raises(GraphError, match="99"):
        GraphCoarsening().coarsen(dangling)

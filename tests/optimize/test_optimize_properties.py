"""Property tests on random DAGs: invariants hold whatever the shape."""

from __future__ import annotations

import itertools

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from codedag.graph.model import ExecutionDAG
from codedag.optimize.coarsen import GraphCoarsening
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.partition import KWayPartitioner
from codedag.optimize.refine import IterativeOptimizer

NAMES = ["cv2.resize", "cv2.cvtColor", "numpy.clip", "pkg.f", "pkg.g"]


@st.composite
def random_dags(draw: st.DrawFn) -> ExecutionDAG:
    """Calls and values in id order; every edge goes from a lower to a higher id."""
    n = draw(st.integers(min_value=0, max_value=40))
    dag = ExecutionDAG()
    kinds = []
    for i in range(n):
        if draw(st.booleans()):
            ns = draw(st.integers(min_value=0, max_value=10_000))
            name = draw(st.sampled_from(NAMES))
            dag.add_call(name=name, context_key=f"{name}#{i}", total_ns=ns, self_ns=ns)
            kinds.append("call")
        else:
            dag.add_value(name="ndarray", nbytes=draw(st.integers(min_value=0, max_value=1 << 20)))
            kinds.append("value")
    for a, b in itertools.combinations(range(n), 2):
        if draw(st.integers(min_value=0, max_value=5)) != 0:
            continue
        pair = (kinds[a], kinds[b])
        kind = {("call", "call"): "calls", ("call", "value"): "produces"}.get(pair, "uses")
        if pair != ("value", "value"):
            dag.add_edge(a, b, kind)
    return dag


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(dag=random_dags(), k=st.integers(min_value=1, max_value=4))
def test_invariants_on_random_dags(dag: ExecutionDAG, k: int) -> None:
    coarse = GraphCoarsening(max_depth=3).coarsen(dag)
    assert sum(n.self_ns for n in coarse.calls()) == sum(n.self_ns for n in dag.calls())
    assert sorted(i for n in coarse.nodes.values() for i in n.original_ids) == sorted(dag.nodes)
    parts = KWayPartitioner(k=k).partition(coarse)
    seen = [node for p in parts for node in p.nodes]
    assert len(seen) == len(set(seen)) == len(coarse.nodes)
    refiner = IterativeOptimizer(max_iterations=30, max_cut_increase=2)
    refined = refiner.optimize(parts, coarse)
    history = refiner.stats.get("objective_history", [])
    assert all(b <= a for a, b in itertools.pairwise(history))
    assert sorted(node for p in refined for node in p.nodes) == sorted(coarse.nodes)
    plan = OptimizerManager(k=k, gpu_count=1).get_migration_plan(refined, coarse)
    traced = sorted(n.context_key for n in dag.calls())
    assert sorted(key for c in plan["calls"] for key in c["context_keys"]) == traced
    assert set(plan["context_device_map"]) <= set(traced)

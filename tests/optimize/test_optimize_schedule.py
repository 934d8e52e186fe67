"""Makespan under the cost model: list scheduling of a fixed placement and HEFT."""

from __future__ import annotations

import pytest
from optimize_helpers import add_call, add_value

from codedag.graph.model import ExecutionDAG
from codedag.optimize.costs import CostModel
from codedag.optimize.schedule import heft, list_schedule
from codedag.optimize.synthetic import trace_shaped_dag


def test_all_cpu_makespan_is_the_sum_of_self_times_on_one_core() -> None:
    dag = trace_shaped_dag(300, batch_size=4)
    total = sum(n.self_ns for n in dag.calls())
    assert list_schedule(dag, set()) == pytest.approx(total)


def test_moving_a_heavy_migratable_call_overlaps_it_with_independent_cpu_work() -> None:
    dag = ExecutionDAG()
    root = add_call(dag, "pkg.main", None, "pkg.main#0", 0, 0)
    heavy = add_call(dag, "cv2.resize", root, "pkg.main#0/cv2.resize#0", 8_000_000, 1)
    add_value(dag, heavy, 1024)
    add_call(dag, "pkg.other", root, "pkg.main#0/pkg.other#0", 8_000_000, 1)
    cost = CostModel(accelerator_speedup=8.0, launch_overhead_ns=0)
    cpu_only = list_schedule(dag, set(), cost)
    moved = list_schedule(dag, {heavy}, cost)
    assert cpu_only == pytest.approx(16_000_000)
    assert moved < cpu_only and moved == pytest.approx(8_000_000, rel=0.01)
    best, placed = heft(dag, cost)
    assert best <= moved + 1 and heavy in placed


def test_non_migratable_calls_never_go_to_the_accelerator() -> None:
    dag = trace_shaped_dag(300, batch_size=4)
    _, placed = heft(dag, can_migrate=lambda name: False)
    assert placed == set()

"""The optimizer's result: typed fields, and the dict keys callers read before, over the same objects."""

from __future__ import annotations

import pytest

from codedag.optimize.coarse import CoarsenedDAG
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.result import OptimizeResult
from codedag.optimize.synthetic import trace_shaped_dag
from codedag.plan import MigrationPlan


@pytest.fixture(scope="module")
def result() -> OptimizeResult:
    return OptimizerManager(k=2, calibrate=False).optimize(trace_shaped_dag(40, seed=3))


def test_the_fields_are_the_passes_outputs(result: OptimizeResult) -> None:
    assert isinstance(result.coarsened_dag, CoarsenedDAG)
    assert len(result.optimized_partitions) == len(result.kway_partitions) == 2
    covered = {n for p in result.optimized_partitions for n in p.nodes}
    assert covered == set(result.coarsened_dag.nodes)
    assert set(result.statistics) == {"coarsening", "partitioning", "edge_cut", "iteration"}
    plan = result.plan
    assert isinstance(plan, MigrationPlan)
    assert [c.function for c in plan.calls] == [
        c["function"] for c in result.migration_plan["calls"]
    ]


def test_the_original_dict_keys_read_the_same_objects(result: OptimizeResult) -> None:
    assert list(result) == [
        "coarsened_dag",
        "kway_partitions",
        "optimized_partitions",
        "migration_plan",
        "statistics",
    ]
    assert result["coarsened_dag"] is result.coarsened_dag
    assert result["migration_plan"] is result.migration_plan
    assert dict(result)["statistics"] is result.statistics
    assert "migration_plan" in result and "plan" not in result and len(result) == 5
    with pytest.raises(KeyError):
        result["plan"]

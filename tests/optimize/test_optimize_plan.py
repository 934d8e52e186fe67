"""Placement and the migration plan: contract format, transfer-cost rule, no-GPU notes, keys."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from optimize_helpers import add_call, add_value

from codedag.graph.model import ExecutionDAG
from codedag.optimize.costs import CostModel, builtin_can_migrate, default_can_migrate
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.partition import Partition, as_coarse
from codedag.optimize.plan import PLAN_KEYS, build_plan
from codedag.optimize.synthetic import trace_shaped_dag

MIB = 1 << 20


def _sandwich(middle_ns: int, middle_bytes: int) -> ExecutionDAG:
    """cpu_op -> v1 -> cv2.flip -> v2 -> cpu_op2, under one root call."""
    dag = ExecutionDAG()
    root = add_call(dag, "pkg.pipeline", None, "pkg.pipeline#0", 10_000_000 + middle_ns, 0)
    load = add_call(dag, "pkg.decode", root, "pkg.pipeline#0/pkg.decode#0", 5_000_000, 1)
    v1 = add_value(dag, load, middle_bytes)
    flip = add_call(dag, "cv2.flip", root, "pkg.pipeline#0/cv2.flip#0", middle_ns, 1)
    dag.add_edge(v1, flip, "uses")
    v2 = add_value(dag, flip, middle_bytes)
    post = add_call(dag, "pkg.encode", root, "pkg.pipeline#0/pkg.encode#0", 5_000_000, 1)
    dag.add_edge(v2, post, "uses")
    add_value(dag, post, 1024)
    return dag


def _one_gpu_plan(dag: ExecutionDAG, **cost: float) -> dict:  # type: ignore[type-arg]
    coarse = as_coarse(dag)
    # everything but the root in the accelerator partition: only the cost rule decides
    root = min(coarse.nodes)
    parts = [
        Partition(0, root, {root}),
        Partition(1, max(coarse.nodes), set(coarse.nodes) - {root}),
    ]
    only_flip = lambda name: name == "cv2.flip"  # noqa: E731 - the registry's contents do not matter here
    return build_plan(parts, coarse, gpu_count=1, cost=CostModel(**cost), can_migrate=only_flip)


def _entry(plan: dict, function: str) -> dict:  # type: ignore[type-arg]
    return next(c for c in plan["calls"] if c["function"] == function)


def test_a_cheap_op_between_two_cpu_only_ops_stays_on_the_cpu() -> None:
    plan = _one_gpu_plan(_sandwich(middle_ns=200_000, middle_bytes=8 * MIB))
    flip = _entry(plan, "cv2.flip")
    assert not flip["migrate"] and flip["device"] == "cpu"
    assert flip["transfer_cost_ns"] > flip["estimated_gain_ns"] > 0
    assert plan["context_device_map"] == {}


def test_the_same_op_migrates_when_its_saving_exceeds_the_transfers() -> None:
    plan = _one_gpu_plan(_sandwich(middle_ns=50_000_000, middle_bytes=8 * MIB))
    flip = _entry(plan, "cv2.flip")
    assert flip["migrate"] and flip["device"] == "cuda:0"
    assert flip["estimated_gain_ns"] > flip["transfer_cost_ns"] > 0
    assert plan["context_device_map"] == {"pkg.pipeline#0/cv2.flip#0": "cuda:0"}


def test_a_slower_link_keeps_the_op_on_the_cpu() -> None:
    dag = _sandwich(middle_ns=2_000_000, middle_bytes=8 * MIB)
    assert _entry(_one_gpu_plan(dag), "cv2.flip")["migrate"]
    assert not _entry(
        _one_gpu_plan(dag, h2d_bandwidth_gbps=1.0, d2h_bandwidth_gbps=1.0), "cv2.flip"
    )["migrate"]


def test_plan_has_exactly_the_contract_keys_and_is_json() -> None:
    result = OptimizerManager(k=2, gpu_count=1).optimize(trace_shaped_dag(500, batch_size=8))
    plan = result["migration_plan"]
    assert tuple(plan) == PLAN_KEYS
    assert json.loads(json.dumps(plan)) == plan
    assert plan["context_device_map"], "the synthetic pipeline has profitable cv2 calls"
    for call in plan["calls"]:
        assert {"function", "context_keys", "instance_count", "device", "migrate", "measured_ns",
                "estimated_gain_ns", "transfer_cost_ns", "reason"} == set(call)  # fmt: skip
        assert call["instance_count"] == len(call["context_keys"])


def test_plan_keys_are_the_tracer_context_keys_of_the_placed_calls() -> None:
    dag = trace_shaped_dag(500, batch_size=8)
    manager = OptimizerManager(k=2, gpu_count=1, can_migrate=builtin_can_migrate)
    plan = manager.optimize(dag)["migration_plan"]
    traced = {n.context_key: n.name for n in dag.calls()}
    placed = [key for call in plan["calls"] for key in call["context_keys"]]
    assert sorted(placed) == sorted(traced)  # every traced call placed once, by its own key
    for key, device in plan["context_device_map"].items():
        assert key in traced and device == "cuda:0"
        assert builtin_can_migrate(traced[key])
    migrated = {k for c in plan["calls"] if c["migrate"] for k in c["context_keys"]}
    assert migrated == set(plan["context_device_map"])


@pytest.mark.parametrize("gpus", [1, 2])
def test_partitions_with_savings_share_the_accelerators_and_one_stays_on_the_cpu(
    gpus: int,
) -> None:
    dag = trace_shaped_dag(3000, batch_size=16)
    manager = OptimizerManager(k=3, gpu_count=gpus, can_migrate=builtin_can_migrate)
    plan = manager.optimize(dag)["migration_plan"]
    devices = list(plan["partition_device_map"].values())
    assert "cpu" in devices
    assert {d for d in devices if d != "cpu"} <= {f"cuda:{i}" for i in range(gpus)}
    # with one accelerator partition only, numpy.clip sat in a CPU partition and stayed there
    migrated = {c["function"] for c in plan["calls"] if c["migrate"]}
    assert {"cv2.resize", "numpy.clip"} <= migrated


def test_no_gpu_and_no_target_device_migrates_nothing_and_says_why() -> None:
    plan = OptimizerManager(k=2).optimize(trace_shaped_dag(300, batch_size=8))["migration_plan"]
    assert plan["context_device_map"] == {}
    assert set(plan["partition_device_map"].values()) == {"cpu"}
    assert any("no GPU" in note for note in plan["notes"])
    assert all(not c["migrate"] for c in plan["calls"])


def test_target_device_cpu_plans_torch_on_cpu_with_the_same_calls_as_a_gpu() -> None:
    dag = trace_shaped_dag(300, batch_size=8)
    on_cpu = OptimizerManager(k=2, target_device="cpu").optimize(dag)["migration_plan"]
    on_gpu = OptimizerManager(k=2, gpu_count=1).optimize(dag)["migration_plan"]
    assert on_cpu["context_device_map"]
    assert set(on_cpu["context_device_map"].values()) == {"cpu"}
    assert set(on_cpu["context_device_map"]) == set(on_gpu["context_device_map"])
    assert on_cpu["target_device"] == "cpu"


def test_empty_dag_gives_an_empty_plan() -> None:
    result = OptimizerManager(k=2, gpu_count=1).optimize(ExecutionDAG())
    plan = result["migration_plan"]
    assert plan["calls"] == [] and plan["context_device_map"] == {}
    assert result["optimized_partitions"] == []
    assert any("empty" in note for note in plan["notes"])
    assert not any("single partition" in note for note in plan["notes"])


def test_can_migrate_predicate_is_asked() -> None:
    dag = trace_shaped_dag(300, batch_size=8)
    plan = OptimizerManager(k=2, gpu_count=1, can_migrate=lambda name: False).optimize(dag)[
        "migration_plan"
    ]
    assert plan["context_device_map"] == {}


def test_default_predicate_asks_the_migration_registry_when_it_exists(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import types

    fake = types.ModuleType("codedag.migrate.registry")
    fake.is_migratable = lambda name: name == "pkg.custom"  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "codedag.migrate.registry", fake)
    predicate = default_can_migrate()
    assert predicate("pkg.custom") and not predicate("cv2.resize")
    monkeypatch.setitem(sys.modules, "codedag.migrate.registry", None)  # import fails
    assert default_can_migrate() is builtin_can_migrate


_DETERMINISM = """
import json
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.synthetic import trace_shaped_dag
result = OptimizerManager(k=3, gpu_count=1).optimize(trace_shaped_dag(1500, batch_size=8, seed=4))
print(json.dumps([result["migration_plan"], [sorted(p.nodes) for p in result["optimized_partitions"]]]))
"""


def test_same_input_gives_the_same_plan_across_processes_and_hash_seeds() -> None:
    outputs = []
    for hash_seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": hash_seed}
        done = subprocess.run(
            [sys.executable, "-c", _DETERMINISM], env=env, capture_output=True, text=True,
            check=True,
        )  # fmt: skip
        outputs.append(done.stdout)
    assert outputs[0] == outputs[1]


def test_export_dir_gets_the_five_stage_files(tmp_path: pytest.TempPathFactory) -> None:
    from codedag.optimize.export import FILES

    OptimizerManager(k=2, gpu_count=1).optimize(trace_shaped_dag(300, batch_size=4), tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES)  # type: ignore[attr-defined]
    plan = json.loads((tmp_path / "migration_plan.json").read_text())  # type: ignore[operator]
    assert plan["schema_version"] == 1
    dot = (tmp_path / "coarsening_graph.dot").read_text()  # type: ignore[operator]
    assert dot.startswith("digraph") and "cv2.resize x" in dot

"""Placement from measurements and the migration plan: rule, margin, semantics, reasons, format."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter

import pytest
from optimize_helpers import add_call, add_value, builtin_can_migrate, fake_calibration

from codedag.graph.model import ExecutionDAG
from codedag.optimize.costs import default_can_migrate
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.partition import Partition, as_coarse
from codedag.optimize.placement import PlacementSettings
from codedag.optimize.plan_builder import UNPLACEABLE_KEYS, build_plan
from codedag.optimize.synthetic import trace_shaped_dag
from codedag.plan import MigrationPlan

MIB = 1 << 20
ALL = lambda name: not name.startswith("pkg.")  # noqa: E731 - library calls only
NONE_BLOCKED = lambda name: None  # noqa: E731
# The keys of a plan's JSON form, in order, when it has no loader, cache or tables section.
PLAN_KEYS = (
    "schema_version",
    "codedag_version",
    "k",
    "gpu_count",
    "target_device",
    "partition_device_map",
    "context_device_map",
    "calls",
    "notes",
    "placement",
    "batched",
)


def _sandwich(middle: str = "cv2.flip", middle_bytes: int = 8 * MIB) -> ExecutionDAG:
    """pkg.decode -> v1 -> MIDDLE -> v2 -> pkg.encode, under one root call."""
    dag = ExecutionDAG()
    root = add_call(dag, "pkg.pipeline", None, "pkg.pipeline#0", 20_000_000, 0)
    load = add_call(dag, "pkg.decode", root, "pkg.pipeline#0/pkg.decode#0", 5_000_000, 1)
    v1 = add_value(dag, load, middle_bytes)
    mid = add_call(dag, middle, root, f"pkg.pipeline#0/{middle}#0", 1_000_000, 1)
    dag.add_edge(v1, mid, "uses")
    v2 = add_value(dag, mid, middle_bytes)
    post = add_call(dag, "pkg.encode", root, "pkg.pipeline#0/pkg.encode#0", 5_000_000, 1)
    dag.add_edge(v2, post, "uses")
    add_value(dag, post, 1024)
    return dag


def _chain(names: list[str]) -> ExecutionDAG:
    """pkg.decode -> a -> b -> ... -> pkg.encode, each a separate call under one root."""
    dag = ExecutionDAG()
    root = add_call(dag, "pkg.pipeline", None, "pkg.pipeline#0", 50_000_000, 0)
    prev = add_value(dag, add_call(dag, "pkg.decode", root, "r#0/pkg.decode#0", 1_000_000, 1), MIB)
    for i, name in enumerate(names):
        node = add_call(dag, name, root, f"pkg.pipeline#0/{name}#{i}", 1_000_000, 1)
        dag.add_edge(prev, node, "uses")
        prev = add_value(dag, node, MIB)
    return dag


def _plan(dag: ExecutionDAG, cal: object, target: str = "cpu", **settings: object) -> dict:  # type: ignore[type-arg]
    coarse = as_coarse(dag)
    parts = [Partition(0, min(coarse.nodes), set(coarse.nodes))]
    return build_plan(
        parts, coarse, gpu_count=0, target_device=target, can_migrate=ALL,
        calibration=cal, settings=PlacementSettings(**settings),  # type: ignore[arg-type]
        blocker=NONE_BLOCKED, positional=lambda name: ("src", "dst"),
    ).to_dict()  # fmt: skip


def _entry(plan: dict, function: str) -> dict:  # type: ignore[type-arg]
    return next(c for c in plan["calls"] if c["function"] == function)


def test_a_call_moves_only_when_the_measurement_says_it_wins() -> None:
    dag = _sandwich()
    faster = _plan(dag, fake_calibration(dag, {"cv2.flip": 0.4}))
    flip = _entry(faster, "cv2.flip")
    assert flip["migrate"] and flip["device"] == "cpu" and flip["basis"] == "measured"
    assert flip["original_ns"] == 1_000_000 and flip["backend_ns"] == 400_000
    assert flip["saving_ns"] == 600_000
    assert faster["context_device_map"] == {"pkg.pipeline#0/cv2.flip#0": "cpu"}
    assert "measured 1 ms with the library vs 0.4 ms through torch on cpu" in flip["reason"]

    slower = _plan(dag, fake_calibration(dag, {"cv2.flip": 33.0}))
    flip = _entry(slower, "cv2.flip")
    assert not flip["migrate"] and flip["device"] == "cpu"
    assert "33x slower through torch, stays" in flip["reason"]
    assert slower["context_device_map"] == {}
    assert any("nothing moves" in n for n in slower["notes"])


def test_a_saving_within_the_margin_or_the_spread_stays() -> None:
    dag = _sandwich()
    small = _entry(_plan(dag, fake_calibration(dag, {"cv2.flip": 0.95})), "cv2.flip")
    assert not small["migrate"] and "within the 10 % margin" in small["reason"]
    allowed = _entry(
        _plan(dag, fake_calibration(dag, {"cv2.flip": 0.95}), margin_pct=2), "cv2.flip"
    )
    assert allowed["migrate"]
    noisy = fake_calibration(dag, {"cv2.flip": 0.8}, spread_pct=40)
    spread = _entry(_plan(dag, noisy), "cv2.flip")
    assert not spread["migrate"] and "within the measurement spread" in spread["reason"]


def test_a_call_that_cannot_be_measured_stays_with_the_reason() -> None:
    dag = _sandwich()
    cal = fake_calibration(dag, {}, errors={"cv2.flip": "backend result differs: 3 values"})
    flip = _entry(_plan(dag, cal), "cv2.flip")
    assert not flip["migrate"] and flip["reason"] == "backend result differs: 3 values"
    uncalibrated = _entry(_plan(dag, fake_calibration(dag, {})), "cv2.flip")
    assert not uncalibrated["migrate"] and "not calibrated" in uncalibrated["reason"]


def test_on_a_gpu_a_chain_saves_the_uploads_between_placed_calls() -> None:
    dag = _chain(["cv2.resize", "cv2.flip"])
    # alone each loses: 1 ms vs 0.7 ms + 0.5 ms of upload measured in its path; chained, the
    # second call's input is already on the device, and that makes it win
    cal = fake_calibration(dag, {"cv2.resize": 0.85, "cv2.flip": 1.05}, h2d_ns=500_000)
    plan = _plan(dag, cal, target="cuda:0")
    resize, flip = _entry(plan, "cv2.resize"), _entry(plan, "cv2.flip")
    assert resize["migrate"] and resize["device"] == "cuda:0"
    assert flip["migrate"] and "uploads saved by placed producers" in flip["reason"]
    # on the CPU there is no upload to save: the slower call stays
    on_cpu = _plan(dag, fake_calibration(dag, {"cv2.resize": 0.85, "cv2.flip": 1.05}))
    assert _entry(on_cpu, "cv2.resize")["migrate"] and not _entry(on_cpu, "cv2.flip")["migrate"]


def test_patching_cost_of_the_unplaced_calls_can_outweigh_the_saving() -> None:
    dag = _chain(["numpy.sum"])
    root = min(dag.nodes)
    for i in range(2000):  # many other calls of the same function that would stay
        add_call(dag, "numpy.sum", root, f"pkg.pipeline#0/pkg.other#{i}/numpy.sum#0", 3_000, 1)
    cal = fake_calibration(dag, {"numpy.sum": 0.5}, passthrough_ns=1_000)
    from codedag.calibrate import CallEstimate, Measurement, Timing

    tiny = Measurement(
        "numpy.sum", "tiny", "", "cpu", "fake cpu",
        original=Timing(3_000, 2_990, 3_010, 9), backend=Timing(30_000, 29_990, 30_010, 9),
    )  # fmt: skip
    for node in dag.calls():  # the other calls are tiny: they lose through torch and stay
        if node.name == "numpy.sum" and node.total_ns == 3_000:
            cal.calls[node.id] = CallEstimate(tiny)
    plan = _plan(dag, cal)
    placed = [c for c in plan["calls"] if c["function"] == "numpy.sum" and c["migrate"]]
    assert placed == []
    assert any("adds 1 us to each of its" in c["reason"] for c in plan["calls"])


def test_semantics_first_random_draws_output_buffers_and_user_choices() -> None:
    dag = _sandwich("numpy.random.uniform")
    from codedag.backends.placement_blockers import placement_blocker

    coarse = as_coarse(dag)
    parts = [Partition(0, min(coarse.nodes), set(coarse.nodes))]
    cal = fake_calibration(dag, {"numpy.random.uniform": 0.1})

    def plan_with(**settings: object) -> dict:  # type: ignore[type-arg]
        return build_plan(
            parts, coarse, 0, "cpu", can_migrate=ALL, calibration=cal,
            settings=PlacementSettings(**settings), blocker=placement_blocker,  # type: ignore[arg-type]
            positional=lambda n: ("low", "high", "size"),
        ).to_dict()  # fmt: skip

    draw = _entry(plan_with(), "numpy.random.uniform")
    assert not draw["migrate"] and "draws random numbers" in draw["reason"]
    assert "--only" in draw["reason"]
    opted = _entry(plan_with(only=frozenset({"numpy.random.uniform"})), "numpy.random.uniform")
    assert opted["migrate"]

    flips = _sandwich("cv2.flip")
    out_arg = next(n for n in flips.calls() if n.name == "cv2.flip")
    out_arg.args = [{"name": "0", "kind": "array", "shape": [2]}, {"name": "dst", "kind": "array"}]
    cal = fake_calibration(flips, {"cv2.flip": 0.1})
    opted = _plan(flips, cal, only=frozenset({"cv2.flip"}))
    assert not _entry(opted, "cv2.flip")["migrate"]
    assert "output buffer (dst=)" in _entry(opted, "cv2.flip")["reason"]
    out_arg.args = [
        {"name": "0", "kind": "array"},
        {"name": "1", "kind": "array"},
    ]  # dst positional
    assert "output buffer" in _entry(_plan(flips, cal), "cv2.flip")["reason"]
    out_arg.args = [
        {"name": "0", "kind": "array"},
        {"name": "dst", "kind": "scalar", "value": None},
    ]
    assert _entry(_plan(flips, cal), "cv2.flip")["migrate"]  # dst=None is no buffer

    excluded = _plan(flips, cal, exclude=frozenset({"cv2.flip"}))
    assert "excluded by the user" in _entry(excluded, "cv2.flip")["reason"]
    other = _plan(flips, cal, only=frozenset({"cv2.resize"}))
    assert "not among the functions named with --only" in _entry(other, "cv2.flip")["reason"]


def test_assumed_speedup_is_labelled_as_an_assumption() -> None:
    dag = _sandwich()
    plan = _plan(dag, None, assume_speedup=8.0)
    flip = _entry(plan, "cv2.flip")
    assert flip["migrate"] and flip["basis"] == "assumed"
    assert "ASSUMED 8x speedup, not measured" in flip["reason"]
    assert plan["placement"]["basis"] == "assumed" and plan["placement"]["assumed_speedup"] == 8.0
    assert any(n.startswith("ASSUMPTION") for n in plan["notes"])


def test_without_measurements_or_an_assumption_nothing_moves() -> None:
    flip = _entry(_plan(_sandwich(), None), "cv2.flip")
    assert not flip["migrate"] and "calibrate to place calls" in flip["reason"]


def test_a_call_inside_a_placed_call_is_covered_by_it() -> None:
    dag = ExecutionDAG()
    root = add_call(dag, "pkg.pipeline", None, "pkg.pipeline#0", 10_000_000, 0)
    mel = add_call(dag, "librosa.feature.melspectrogram", root, "p#0/mel#0", 5_000_000, 1)
    add_call(dag, "numpy.abs", mel, "p#0/mel#0/numpy.abs#0", 1_000_000, 2)
    cal = fake_calibration(dag, {"librosa.feature.melspectrogram": 0.5, "numpy.abs": 0.5})
    plan = _plan(dag, cal)
    assert _entry(plan, "librosa.feature.melspectrogram")["migrate"]
    inner = _entry(plan, "numpy.abs")
    assert (
        not inner["migrate"]
        and "inside placed call librosa.feature.melspectrogram" in inner["reason"]
    )


def test_dataloader_workers_place_for_the_cpu_even_when_the_target_is_a_gpu() -> None:
    dag = _sandwich()
    dag.metadata["dataloader"] = {"num_workers": 2}
    plan = _plan(dag, fake_calibration(dag, {"cv2.flip": 0.4}), target="cuda:0")
    assert plan["target_device"] == "cpu"
    assert _entry(plan, "cv2.flip")["device"] == "cpu"
    assert any("worker process(es), where CUDA is never used" in n for n in plan["notes"])


def test_k_1_still_places_and_reasons_never_blame_a_cpu_partition() -> None:
    dag = trace_shaped_dag(300, batch_size=8)
    plan = OptimizerManager(
        k=1, target_device="cpu", placement=PlacementSettings(assume_speedup=8.0),
        can_migrate=builtin_can_migrate,
    ).optimize(dag)["migration_plan"]  # fmt: skip
    assert plan["context_device_map"]
    two = OptimizerManager(
        k=2, target_device="cpu", placement=PlacementSettings(assume_speedup=8.0),
        can_migrate=builtin_can_migrate,
    ).optimize(dag)["migration_plan"]  # fmt: skip
    assert set(two["context_device_map"]) == set(plan["context_device_map"])
    for p in (plan, two):
        assert not any("partition" in c["reason"] for c in p["calls"])
        assert not any("k=1" in n for n in p["notes"])


def test_plan_has_exactly_the_model_keys_and_validates() -> None:
    result = OptimizerManager(
        k=2, target_device="cpu", placement=PlacementSettings(assume_speedup=8.0)
    ).optimize(trace_shaped_dag(500, batch_size=8))
    plan = result["migration_plan"]
    assert tuple(plan) == PLAN_KEYS
    assert json.loads(json.dumps(plan)) == plan
    assert MigrationPlan.from_dict(plan).to_dict() == plan
    assert plan["context_device_map"], "the synthetic pipeline has cv2 calls worth placing"
    for call in plan["calls"]:
        if call["reason"].startswith("no torch backend"):  # one entry, its first few keys
            assert len(call["context_keys"]) == min(UNPLACEABLE_KEYS, call["instance_count"])
        else:
            assert call["instance_count"] == len(call["context_keys"])
    # a reason's figures are the traced calls' sum, the entry's one call's: it says so
    judged = [c for c in plan["calls"] if c["basis"] == "assumed" and c["instance_count"] > 1]
    assert judged
    for call in judged:
        assert f"over its {call['instance_count']} traced calls" in call["reason"]


def test_plan_keys_are_the_tracer_context_keys_of_the_placed_calls() -> None:
    dag = trace_shaped_dag(500, batch_size=8)
    manager = OptimizerManager(
        k=2, target_device="cpu", can_migrate=builtin_can_migrate,
        placement=PlacementSettings(assume_speedup=8.0),
    )  # fmt: skip
    plan = manager.optimize(dag)["migration_plan"]
    traced = {n.context_key: n.name for n in dag.calls()}
    placeable = sorted(k for k, name in traced.items() if builtin_can_migrate(name))
    placed = [
        key for call in plan["calls"] if builtin_can_migrate(call["function"])
        for key in call["context_keys"]
    ]  # fmt: skip
    assert sorted(placed) == placeable  # every call that could move placed once, by its key
    # a function nothing can move: one entry for all its calls, its first keys
    unplaceable = Counter(name for name in traced.values() if not builtin_can_migrate(name))
    entries = [c for c in plan["calls"] if not builtin_can_migrate(c["function"])]
    assert {c["function"]: c["instance_count"] for c in entries} == unplaceable
    assert len(entries) == len(unplaceable)
    for call in entries:
        assert set(call["context_keys"]) <= set(traced)
        assert len(call["context_keys"]) == min(UNPLACEABLE_KEYS, call["instance_count"])
    for key in plan["context_device_map"]:
        assert key in traced and builtin_can_migrate(traced[key])
    migrated = {k for c in plan["calls"] if c["migrate"] for k in c["context_keys"]}
    assert migrated == set(plan["context_device_map"])


@pytest.mark.parametrize("gpus", [1, 2])
def test_partitions_with_placed_calls_share_the_accelerators(gpus: int) -> None:
    dag = trace_shaped_dag(3000, batch_size=16)
    manager = OptimizerManager(
        k=3, gpu_count=gpus, can_migrate=builtin_can_migrate,
        placement=PlacementSettings(assume_speedup=8.0),
    )  # fmt: skip
    plan = manager.optimize(dag)["migration_plan"]
    devices = set(plan["partition_device_map"].values())
    assert devices - {"cpu"} <= {f"cuda:{i}" for i in range(gpus)}
    assert set(plan["context_device_map"].values()) <= devices - {"cpu"}
    migrated = {c["function"] for c in plan["calls"] if c["migrate"]}
    assert "cv2.resize" in migrated


def test_no_gpu_and_no_target_device_migrates_nothing_and_says_why() -> None:
    plan = OptimizerManager(k=2).optimize(trace_shaped_dag(300, batch_size=8))["migration_plan"]
    assert plan["context_device_map"] == {}
    assert set(plan["partition_device_map"].values()) == {"cpu"}
    assert any("no GPU" in note for note in plan["notes"])
    assert all(not c["migrate"] for c in plan["calls"])


def test_a_target_that_does_not_exist_here_is_not_measured_and_says_so() -> None:
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA exists here")
    plan = OptimizerManager(k=2, gpu_count=1).optimize(trace_shaped_dag(300, batch_size=8))[
        "migration_plan"
    ]
    assert plan["context_device_map"] == {}
    assert any("cuda:0 does not exist here" in note for note in plan["notes"])


def test_empty_dag_gives_an_empty_plan() -> None:
    result = OptimizerManager(k=2, target_device="cpu").optimize(ExecutionDAG())
    plan = result["migration_plan"]
    assert plan["calls"] == [] and plan["context_device_map"] == {}
    assert result["optimized_partitions"] == []
    assert any("empty" in note for note in plan["notes"])


def test_can_migrate_predicate_is_asked() -> None:
    dag = trace_shaped_dag(300, batch_size=8)
    plan = OptimizerManager(
        k=2, target_device="cpu", can_migrate=lambda name: False,
        placement=PlacementSettings(assume_speedup=8.0),
    ).optimize(dag)["migration_plan"]  # fmt: skip
    assert plan["context_device_map"] == {}
    assert all(c["reason"].startswith("no torch backend") for c in plan["calls"])


def test_default_predicate_is_the_op_librarys() -> None:
    predicate = default_can_migrate()
    assert predicate("cv2.resize") and not predicate("pkg.custom")


_DETERMINISM = """
import json
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.placement import PlacementSettings
from codedag.optimize.synthetic import trace_shaped_dag
result = OptimizerManager(
    k=3, target_device="cpu", placement=PlacementSettings(assume_speedup=8.0)
).optimize(trace_shaped_dag(1500, batch_size=8, seed=4))
print(json.dumps([result["migration_plan"], [sorted(p.nodes) for p in result["optimized_partitions"]]]))
"""


@pytest.mark.slow
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

    OptimizerManager(k=2, target_device="cpu").optimize(
        trace_shaped_dag(300, batch_size=4), tmp_path
    )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(FILES)  # type: ignore[attr-defined]
    plan = json.loads((tmp_path / "migration_plan.json").read_text())  # type: ignore[operator]
    assert plan["schema_version"] == 2
    dot = (tmp_path / "coarsening_graph.dot").read_text()  # type: ignore[operator]
    assert dot.startswith("digraph") and "cv2.resize x" in dot


@pytest.mark.parametrize("budget", [-1, 10**20])
def test_a_cache_budget_out_of_bounds_is_refused_before_a_plan_is_written(budget: int) -> None:
    from codedag.errors import ConfigError

    with pytest.raises(ConfigError, match="cache_budget_bytes must be >= 0 and <="):
        OptimizerManager(cache_budget_bytes=budget)

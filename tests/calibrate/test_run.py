"""Calibrating real calls: both paths timed on the device, failures named, cached, stable."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import numpy as np
import pytest
from calibrate_helpers import NoisyStopwatch, array, pipeline_dag, scalar

from codedag.calibrate import Budget, CalibrationCache, Calibrator, calibrate_dag
from codedag.graph.model import ExecutionDAG
from codedag.optimize.manager import OptimizerManager

QUICK = Budget(min_samples=5, target_ns=20_000_000, max_ns=1_000_000_000, warmup=1)


def _functions(cal: object) -> dict[str, object]:
    return {m.function: m for m in cal.measurements.values()}  # type: ignore[attr-defined]


def test_each_signature_is_timed_both_ways_and_cached(tmp_path: Path) -> None:
    cache = CalibrationCache(tmp_path / "c.json")
    dag = pipeline_dag(with_audio=False)
    cal = calibrate_dag(dag, "cpu", cache=cache, budget=QUICK)
    assert cal.measured == 3 and cal.from_cache == 0
    for m in cal.measurements.values():
        assert m.ok, m.error
        assert m.original.samples >= 2 and m.backend.samples >= 2  # type: ignore[union-attr]
        assert m.original.median_ns > 0 and m.backend.median_ns > 0  # type: ignore[union-attr]
        assert m.device == "cpu" and "torch threads" in m.device_name
    warp = _functions(cal)["cv2.warpAffine"]
    assert warp.arguments.startswith("uint8[240,320,3], float64[2,3], (160, 120)")  # type: ignore[attr-defined]
    for call in dag.calls():
        if call.args is not None:
            assert cal.estimate(call.id) is not None
    assert cal.dispatch.passthrough_ns > 0
    start = time.perf_counter()
    again = calibrate_dag(dag, "cpu", cache=CalibrationCache(tmp_path / "c.json"), budget=QUICK)
    assert again.measured == 0 and again.from_cache == 3
    assert time.perf_counter() - start < 1.0
    assert {k: m.to_dict() for k, m in again.measurements.items()} == {
        k: m.to_dict() for k, m in cal.measurements.items()
    }


def test_a_call_the_backend_cannot_reproduce_gets_a_reason_not_a_time() -> None:
    calibrator = Calibrator("cpu", cache=CalibrationCache(None), budget=QUICK)
    # cv2.resize with a float dsize: cv2 itself refuses the rebuilt call
    refused = calibrator.measure(
        "cv2.cvtColor", [array("0", [8, 8, 3], "uint8"), scalar("1", 99999)]
    )
    assert not refused.ok and "the library refuses the rebuilt call" in str(refused.error)
    opaque = calibrator.measure("cv2.flip", [{"name": "0", "kind": "object", "type": "x.Y"}])
    assert not opaque.ok and "cannot rebuild" in str(opaque.error)
    unknown = calibrator.measure("numpy.not_a_function", [array("0", [3], "float32")])
    assert not unknown.ok


def test_a_backend_whose_result_differs_is_not_timed(monkeypatch: object) -> None:
    import codedag.backends.probe as probe

    real = probe.migrated_call

    def off_by_one(name: str, device: str = "cpu", registry: object = None) -> object:
        call = real(name, device, registry)  # type: ignore[arg-type]
        return lambda *a, **k: call(*a, **k) + np.uint8(1)

    monkeypatch.setattr(probe, "migrated_call", off_by_one)  # type: ignore[attr-defined]
    calibrator = Calibrator("cpu", cache=CalibrationCache(None), budget=QUICK)
    m = calibrator.measure("cv2.flip", [array("0", [8, 8, 3], "uint8"), scalar("1", 1)])
    assert not m.ok and "differs from the library's" in str(m.error)
    assert m.original is None and m.backend is None


def test_ragged_inputs_measure_a_few_signatures_and_scale_the_rest() -> None:
    dag = ExecutionDAG()
    for i, h in enumerate(range(100, 220, 10)):  # 12 sizes of the same resize
        dag.add_call(
            name="cv2.resize", context_key=f"cv2.resize#{i}", is_builtin=True,
            args=[array("0", [h, 160, 3], "uint8"), {"name": "1", "kind": "sequence",
                  "type": "tuple", "items": [{"kind": "scalar", "value": 64}] * 2}],
        )  # fmt: skip
    cal = Calibrator("cpu", cache=CalibrationCache(None), budget=QUICK, max_signatures=4)
    out = cal.calibrate(dag.calls())
    assert out.measured == 4 and len(out.calls) == 12
    scales = sorted(e.scale for e in out.calls.values())
    assert scales.count(1.0) >= 4 and scales[0] < 1.0 < scales[-1]


# True per-call times (library, torch) of a typical image + audio pipeline on a CPU.
TRUE_NS = {
    "cv2.warpAffine": (400_000, 13_500_000),
    "cv2.cvtColor": (100_000, 2_300_000),
    "cv2.LUT": (31_000, 242_000),
    "numpy.clip": (3_000, 37_000),
    "librosa.feature.melspectrogram": (2_900_000, 1_400_000),
    "librosa.power_to_db": (300_000, 200_000),
}


def _noisy_calibration(dag: ExecutionDAG, seed: int) -> object:
    """Calibrate ``dag`` through the real sampling and statistics, with every sample drawn as the
    true time times a factor in [0.8, 1.2]."""
    import random

    from codedag.calibrate import Calibration, CallEstimate, Measurement, Stopwatch
    from codedag.calibrate.timing import time_pair

    rng = random.Random(seed)

    class Injected(Stopwatch):
        def __call__(self, fn: object) -> int:
            return int(fn.true_ns * rng.uniform(0.8, 1.2))  # type: ignore[attr-defined]

    def tagged(ns: int) -> object:
        def fn() -> None:
            return None

        fn.true_ns = ns  # type: ignore[attr-defined]
        return fn

    cal = Calibration("cpu", "injected")
    for node in dag.calls():
        if node.name not in TRUE_NS:
            continue
        library, torch_ns = TRUE_NS[node.name]
        a, b = time_pair(tagged(library), tagged(torch_ns), Injected())  # type: ignore[arg-type]
        m = Measurement(node.name, "s", "", "cpu", "injected", original=a, backend=b)
        cal.measurements[node.name] = m
        cal.calls[node.id] = CallEstimate(m)
    return cal


def test_placement_is_stable_under_20_percent_timing_noise() -> None:
    """Five independent calibrations of the same pipeline, every sample under ±20 % noise, give
    the same placed set: adaptive sampling, the margin and the spread keep noise from flipping
    decisions (and the cache keeps a measured decision for later traces)."""
    dag = ExecutionDAG()
    root = dag.add_call(name="pipe.Dataset.__getitem__", context_key="g#0")
    for i, name in enumerate(TRUE_NS):
        node = dag.add_call(name=name, context_key=f"g#0/{name}#{i}", depth=1, args=[])
        dag.add_edge(root, node, "calls")
    placed_sets = []
    for seed in range(5):
        manager = OptimizerManager(
            k=2, target_device="cpu", calibration=_noisy_calibration(dag, seed)
        )
        plan = manager.optimize(dag)["migration_plan"]
        placed_sets.append(frozenset(c["function"] for c in plan["calls"] if c["migrate"]))
    assert len(set(placed_sets)) == 1, placed_sets
    assert placed_sets[0] == {"librosa.feature.melspectrogram", "librosa.power_to_db"}


@pytest.mark.slow
def test_real_calibration_under_injected_noise_gives_the_same_decisions() -> None:
    """The same, through real library calls: each decision that is clear without noise stays."""
    dag = pipeline_dag(with_audio=False)
    placed_sets = []
    for seed in range(3):
        manager = OptimizerManager(
            k=2, target_device="cpu",
            calibration_options={"cache": CalibrationCache(None), "budget": QUICK,
                                 "stopwatch": NoisyStopwatch(0.2, seed)},
        )  # fmt: skip
        plan = manager.optimize(dag)["migration_plan"]
        placed_sets.append(frozenset(c["function"] for c in plan["calls"] if c["migrate"]))
    assert len(set(placed_sets)) == 1, placed_sets


def test_measurements_run_with_the_thread_count_the_calls_will_have() -> None:
    import torch

    before = torch.get_num_threads()
    seen: list[int] = []
    one = Calibrator("cpu", cache=CalibrationCache(None), budget=QUICK, threads=1)
    assert "(1 torch threads" in one.device_name
    import codedag.backends.probe as probe

    real = probe.original_function

    def spy(name: str) -> object:
        fn = real(name)
        return lambda *a, **k: (seen.append(torch.get_num_threads()), fn(*a, **k))[1]

    probe.original_function = spy  # type: ignore[assignment]
    try:
        m = one.measure("cv2.flip", [array("0", [8, 8, 3], "uint8"), scalar("1", 1)])
    finally:
        probe.original_function = real  # type: ignore[assignment]
    assert m.ok and set(seen) == {1}
    assert torch.get_num_threads() == before


def test_the_tolerance_of_a_function_is_found_under_any_of_its_names() -> None:
    """The tracer names librosa functions by their defining module; the tolerance table by the
    public name: both must reach the same tolerance."""
    import pytest

    pytest.importorskip("librosa")
    calibrator = Calibrator("cpu", cache=CalibrationCache(None), budget=QUICK)
    args = [array("y", [22050], "float32"), scalar("sr", 22050), scalar("n_mels", 32)]
    m = calibrator.measure("librosa.feature.spectral.melspectrogram", args)
    assert m.ok, m.error


@pytest.mark.gpu
def test_calibration_on_cuda_measures_copies_and_synchronizes() -> None:
    dag = pipeline_dag(with_audio=False)
    cal = calibrate_dag(dag, "cuda:0", cache=CalibrationCache(None), budget=QUICK)
    assert "sm_" in cal.device_name
    for m in cal.measurements.values():
        assert m.ok, m.error
        assert m.h2d_ns > 0 and m.d2h_ns > 0


def test_malformed_argument_descriptions_are_not_calibrated_and_do_not_crash() -> None:
    dag = ExecutionDAG()
    for i, args in enumerate(
        [
            [{"name": "0", "kind": "array", "shape": "wide", "dtype": "uint8"}],
            [{"name": "0", "kind": "array", "shape": [4, 4], "dtype": "no-such-dtype"}],
            [{"name": "0", "kind": "sequence", "items": "x"}],
            [7],
        ]
    ):
        dag.add_call(name="cv2.flip", context_key=f"cv2.flip#{i}", args=args)  # type: ignore[arg-type]
    out = Calibrator("cpu", cache=CalibrationCache(None), budget=QUICK).calibrate(dag.calls())
    for m in out.measurements.values():
        assert not m.ok
    assert all(
        out.estimate(n.id) is None or not out.estimate(n.id).measurement.ok for n in dag.calls()
    )  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -5, 2.5, True, "7", None])
def test_a_crafted_cache_entry_is_measured_again_not_trusted(tmp_path: Path, bad: object) -> None:
    import json

    dag = ExecutionDAG()
    dag.add_call(
        name="numpy.clip", context_key="numpy.clip#0", is_builtin=True,
        args=[array("0", [64], "float64"), scalar("1", 0), scalar("2", 1)],
    )  # fmt: skip
    path = tmp_path / "c.json"
    first = calibrate_dag(dag, "cpu", cache=CalibrationCache(path), budget=QUICK)
    assert first.measured == 1
    data = json.loads(path.read_text())
    for entry in data["entries"].values():
        if entry.get("function") == "numpy.clip":
            entry["original"]["median_ns"] = bad
            entry["h2d_ns"] = bad
    path.write_text(json.dumps(data))  # NaN and Infinity as Python's json writes them
    again = calibrate_dag(dag, "cpu", cache=CalibrationCache(path), budget=QUICK)
    assert again.measured == 1 and again.from_cache == 0
    (measurement,) = again.measurements.values()
    assert measurement.ok and measurement.original.median_ns > 0  # type: ignore[union-attr]


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -5])
def test_a_cache_with_every_entry_poisoned_is_measured_again(
    tmp_path: Path, bad: float, caplog: pytest.LogCaptureFixture
) -> None:
    import json

    dag = pipeline_dag(with_audio=False)
    path = tmp_path / "c.json"
    calibrate_dag(dag, "cpu", cache=CalibrationCache(path), budget=QUICK)
    data = json.loads(path.read_text())
    for entry in data["entries"].values():
        for timing in ("original", "backend"):
            if isinstance(entry.get(timing), dict):
                entry[timing]["median_ns"] = bad
        for key in ("migrated_ns", "passthrough_ns"):  # the dispatch cost's entry
            if key in entry:
                entry[key] = bad
    path.write_text(json.dumps(data))
    with caplog.at_level(logging.WARNING, logger="codedag.calibrate"):
        again = calibrate_dag(dag, "cpu", cache=CalibrationCache(path), budget=QUICK)
    assert again.measured == 3 and again.from_cache == 0
    assert again.dispatch.passthrough_ns > 0
    assert all(m.ok for m in again.measurements.values())
    assert [r.getMessage() for r in caplog.records if "calibration cache" in r.getMessage()] == [
        f"calibration cache {path}: 4 entries with NaN, infinite or negative figures ignored; "
        "measuring them again"
    ]
    assert "NaN" not in path.read_text() and "Infinity" not in path.read_text()


@pytest.mark.parametrize("device", ["cuda:99", "bogus", "cuda:-1"])
def test_an_argument_recorded_on_a_device_absent_here_is_named_not_a_crash(device: str) -> None:
    tensor = {"name": "0", "kind": "array", "type": "torch.Tensor", "shape": [4, 4],
              "dtype": "float32", "layout": "C", "device": device}  # fmt: skip
    calibrator = Calibrator("cpu", cache=CalibrationCache(None), budget=QUICK)
    measured = calibrator.measure("torch.nn.functional.relu", [tensor])
    assert not measured.ok and "absent here" in str(measured.error)

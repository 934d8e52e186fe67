"""Deciding batched chains from measurements, and the plan's batched section."""

from __future__ import annotations

from typing import Any

import pytest
from test_batched_chains import Flipping, _trace

from codedag.calibrate import CalibrationCache
from codedag.calibrate.chains import ChainMeasurement
from codedag.calibrate.timing import Timing
from codedag.errors import ConfigError
from codedag.optimize.batched import apply_to_plan, batched_section, decide_chain
from codedag.optimize.chains import ChainCandidate, ChainsFound, ChainStep, SampleChain
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.placement import PlacementSettings
from codedag.plan import BatchedChain, MigrationPlan, PlannedCall

MS = 1_000_000


def _candidate() -> ChainCandidate:
    step = ChainStep(1, "cv2.resize", "library", [], "0", (8, 8, 3), "uint8", "a#0/cv2.resize#0")
    return ChainCandidate("chain0", "cv2.resize", [SampleChain(0, [step])])


def _measured(original_ms: float, batched_ms: float, record_ms: float = 0.0) -> ChainMeasurement:
    def timing(ms: float) -> Timing:
        ns = int(ms * MS)
        return Timing(ns, ns - 1000, ns + 1000, 9)

    return ChainMeasurement(
        "chain0",
        "sig",
        "cpu",
        "test cpu",
        16,
        original=timing(original_ms),
        batched=timing(batched_ms),
        record_ns=int(record_ms * MS),
        backend_calls=4,
    )


def _decide(
    m: Any, mode: str = "auto", device: str | None = "cpu", workers: int = 0
) -> BatchedChain:
    return decide_chain(_candidate(), m, mode, device, 10.0, workers, 16)


def test_a_chain_runs_batched_only_when_it_wins_beyond_the_margin() -> None:
    wins = _decide(_measured(100, 40))
    assert wins.batched and wins.basis == "measured"
    assert "100 ms" in wins.reason and "40 ms" in wins.reason
    assert "runs batched" in wins.reason
    assert wins.original_ns == 100 * MS and wins.batched_ns == 40 * MS
    assert wins.backend_calls == 4

    loses = _decide(_measured(10, 200))
    assert not loses.batched
    assert "20x slower" in loses.reason and "stays per sample" in loses.reason

    close = _decide(_measured(100, 95))
    assert not close.batched and "10 % margin" in close.reason


def test_workers_share_the_per_sample_chain_and_the_recording() -> None:
    # 100 ms of per-sample work over 4 workers is 25 ms a batch; batched: 20 ms recording in the
    # workers (5 ms each) + 30 ms in the main process = 35 ms: loses, though 100 > 50 alone.
    m = _measured(100, 50, record_ms=20)
    assert _decide(m).batched
    four = _decide(m, workers=4)
    assert not four.batched
    assert "4 DataLoader workers" in four.reason and "25 ms vs 35 ms" in four.reason


def test_a_device_measurement_says_where_the_batch_ends_and_what_the_host_would_add() -> None:
    m = _measured(100, 40)
    m.delivered, m.upload_ns, m.download_ns = "device", 12 * MS, 48 * MS
    chosen = decide_chain(_candidate(), m, "auto", "cuda:0", 10.0, 0, 16)
    assert chosen.batched
    assert "up to the batch on cuda:0" in chosen.reason
    assert "copy there, 12 ms, included" in chosen.reason
    assert "delivering it on the host would add 48 ms" in chosen.reason


def test_forced_modes_are_labelled_assumed_without_a_measurement() -> None:
    always = _decide(None, "always")
    assert always.batched and always.basis == "assumed"
    assert "--batched always" in always.reason
    never = _decide(None, "never")
    assert not never.batched and never.basis == "assumed"
    measured_always = _decide(_measured(10, 200), "always")
    assert measured_always.batched and measured_always.basis == "measured"
    assert "200 ms" in measured_always.reason


def test_failures_and_missing_devices_keep_the_chain_per_sample() -> None:
    failed = ChainMeasurement("chain0", "s", "cpu", "cpu", 16, error="batched result differs: x")
    decision = _decide(failed)
    assert not decision.batched and "differs" in decision.reason
    assert "no target device" in _decide(None, device=None).reason
    assert "not measured" in _decide(None).reason


def test_batched_chains_leave_per_call_placement_and_the_plan_validates() -> None:
    found = ChainsFound([_candidate()], 1)
    section = batched_section(found, {"chain0": _measured(100, 40)}, "auto", "cpu", 10.0, 0, 16)
    given = MigrationPlan(
        context_device_map={"a#0/cv2.resize#0": "cpu"},
        calls=[
            PlannedCall(
                function="cv2.resize",
                context_keys=["a#0/cv2.resize#0"],
                migrate=True,
                device="cpu",
                reason="measured: saves",
            )
        ],
    )
    before = given.model_copy(deep=True)
    plan = apply_to_plan(given, section)
    assert given == before  # a pure pass: the plan given is left as it was
    assert plan.context_device_map == {}
    assert not plan.calls[0].migrate and "batched chain0" in plan.calls[0].reason
    model = MigrationPlan.from_dict(plan.to_dict())
    assert model.batched.chains[0].batched and model.batched.device == "cpu"
    assert "batched: chain0" in model.notes[-1]


def test_manager_argument_overrides_settings_and_rejects_bad_modes() -> None:
    manager = OptimizerManager(placement=PlacementSettings(batched="never"), batched="always")
    assert manager.placement.batched == "always"
    with pytest.raises(ConfigError, match="auto"):
        OptimizerManager(batched="sometimes")


@pytest.mark.parametrize("mode", ["always", "never"])
def test_optimize_writes_forced_decisions_without_measuring(mode: str) -> None:
    dag = _trace(Flipping())
    manager = OptimizerManager(k=1, target_device="cpu", batched=mode, calibrate=False)
    plan = manager.optimize(dag)["migration_plan"]
    model = MigrationPlan.from_dict(plan)
    assert model.batched.mode == mode
    (chain,) = model.batched.chains
    assert chain.batched is (mode == "always") and chain.basis == "assumed"
    assert chain.functions == ["cv2.cvtColor", "cv2.flip", "cv2.resize"]
    assert chain.entry_functions == ["cv2.resize"] and len(chain.entries) == 4
    assert chain.samples == 4 and chain.batch_size == 4


def test_optimize_auto_measures_each_chain_and_caches_it(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the chain is measured whatever its calls' calibration reads on a busy machine (where the
    # calls look slow enough through torch, it is ruled out unmeasured: test_chains.py)
    monkeypatch.setattr("codedag.calibrate.chains.CALL_OVERHEAD_NS", 10**15)
    dag = _trace(Flipping())
    cache = CalibrationCache(tmp_path / "c.json")
    manager = OptimizerManager(k=1, target_device="cpu", calibration_options={"cache": cache})
    result = manager.optimize(dag)
    (chain,) = MigrationPlan.from_dict(result["migration_plan"]).batched.chains
    assert chain.basis == "measured"
    assert chain.original_ns and chain.batched_ns and chain.backend_calls
    assert "sample by sample with the libraries vs" in chain.reason
    assert not result.measurements.chains["chain0"].cached
    again = OptimizerManager(k=1, target_device="cpu", calibration_options={"cache": cache})
    assert again.optimize(dag).measurements.chains["chain0"].cached


class _Plain(Flipping):
    """No library call: no chain to measure."""

    def __getitem__(self, index: int) -> tuple[Any, int]:
        return self.images[index].tolist(), index


def test_a_second_optimize_never_plans_with_the_first_dags_measurements(tmp_path: Any) -> None:
    cache = CalibrationCache(tmp_path / "c.json")
    manager = OptimizerManager(k=1, target_device="cpu", calibration_options={"cache": cache})
    assert list(manager.optimize(_trace(Flipping())).measurements.chains) == ["chain0"]
    result = manager.optimize(_trace(_Plain()))
    assert not result.measurements.chains  # measured for this DAG, not kept from the first
    assert not (result["migration_plan"].get("batched") or {}).get("chains")

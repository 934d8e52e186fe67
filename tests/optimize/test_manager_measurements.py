"""One OptimizerManager plans any number of DAGs: each plan is made from its own DAG's measurements."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, ClassVar

import cv2
import numpy as np
import pytest
import torch
from test_batched_chains import Flipping, _trace

import codedag.calibrate
import codedag.calibrate.chains
import codedag.calibrate.store_costs
from codedag.calibrate.chains import ChainMeasurement
from codedag.calibrate.measurement import Calibration
from codedag.calibrate.store_costs import StoreCosts
from codedag.calibrate.timing import Timing
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.measurements import PlanMeasurements


class _Larger(Flipping):
    """A shorter pipeline on larger images: other nodes, other chains, other value sizes."""

    def __init__(self) -> None:
        super().__init__(n=6)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        img = cv2.resize(self.images[index], (24, 24), interpolation=cv2.INTER_LINEAR)
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), index


def _timing(ns: int) -> Timing:
    return Timing(ns, ns - 10, ns + 10, 9)


class _Chains:
    """Chain figures that follow from the chain and its batch (deterministic)."""

    seen: ClassVar[list[str]] = []

    def __init__(self, device: str, cache: Any = None) -> None:
        self.device = device

    def measure(self, candidate: Any, batch_size: int) -> ChainMeasurement:
        self.seen.append(f"{candidate.id} of {len(candidate.steps)} steps")
        original = 1_000_000 * batch_size * len(candidate.steps)
        return ChainMeasurement(
            candidate.id,
            f"{candidate.id}/{batch_size}",
            self.device,
            "fake device",
            batch_size,
            original=_timing(original),
            batched=_timing(original // 3),
            backend_calls=len(candidate.steps),
        )


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Deterministic measurements named after what they measured; the list of what was measured."""
    seen: ClassVar[list[str]] = []

    def calibrate_dag(dag: Any, device: str = "cpu", names: Any = None, **_: Any) -> Calibration:
        seen.append(f"calls of {len(dag.nodes)} nodes")
        return Calibration(device, f"measured for {len(dag.nodes)} nodes")

    def measure_store(sizes: Iterable[int], repeats: int = 7) -> StoreCosts:
        wanted = sorted(set(sizes))
        seen.append(f"store for {wanted[-1]} bytes")
        cost = 1000 + wanted[-1]  # depends on the whole set: not a linear function of the size
        return StoreCosts(wanted, [cost] * len(wanted), [2 * cost] * len(wanted), "fake")

    monkeypatch.setattr(codedag.calibrate, "calibrate_dag", calibrate_dag)
    monkeypatch.setattr(_Chains, "seen", seen)
    monkeypatch.setattr(codedag.calibrate.chains, "ChainCalibrator", _Chains)
    monkeypatch.setattr(codedag.calibrate.store_costs, "measure_store", measure_store)
    return seen


def _manager() -> OptimizerManager:
    return OptimizerManager(k=1, target_device="cpu", cache="auto", cache_budget_bytes=1 << 30)


def test_a_second_dag_is_planned_as_a_fresh_manager_plans_it(fakes: list[str]) -> None:
    small, large = _trace(Flipping()), _trace(_Larger())
    manager = _manager()
    first = manager.optimize(small)
    second = manager.optimize(large)
    fresh = _manager().optimize(large)
    assert second["migration_plan"] == fresh["migration_plan"]
    assert second.measurements == fresh.measurements
    # Each call measured its own DAG (calls, chains, store), the first DAG's figures differ:
    assert len(fakes) == 9 and fakes[3:6] == fakes[6:]
    assert all(a != b for a, b in zip(fakes[:3], fakes[3:6], strict=True))
    assert first.measurements != second.measurements
    names = [r["migration_plan"]["placement"]["device_name"] for r in (first, second)]
    assert names == [f"measured for {len(d.nodes)} nodes" for d in (small, large)]


def test_the_manager_keeps_its_settings_only(fakes: list[str]) -> None:
    manager = _manager()
    before = dict(vars(manager))
    manager.optimize(_trace(Flipping()))
    assert vars(manager).keys() == before.keys()
    assert not any(isinstance(v, PlanMeasurements) for v in vars(manager).values())
    assert manager.calibration is None  # the constructor's argument: nothing given


def test_measurements_are_one_read_only_value() -> None:
    chains = {"chain0": None}
    m = PlanMeasurements(chains=chains)  # type: ignore[dict-item]
    chains["chain1"] = None
    assert list(m.chains) == ["chain0"]
    with pytest.raises(dataclasses.FrozenInstanceError):
        m.problem = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        m.chains["chain2"] = None  # type: ignore[index]

"""Placement is measured with the tuned loader: its workers decide the device, its threads the
calibration thread count, and the plan carries the loader section."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
from torch.utils.data import DataLoader, Dataset

import codedag.calibrate
from codedag.cli.main import main
from codedag.optimize.manager import OptimizerManager
from codedag.plan import LoaderSection, LoaderSettings, MigrationPlan
from codedag.trace import trace_dataloader


class _Images(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, idx: int) -> np.ndarray:
        image = np.full((96, 96, 3), idx, dtype=np.uint8)
        return cv2.cvtColor(cv2.resize(image, (48, 48)), cv2.COLOR_BGR2RGB)


def _section(workers: int, threads: int | None) -> LoaderSection:
    chosen = LoaderSettings(num_workers=workers, threads=threads)
    return LoaderSection(chosen=chosen, yours=LoaderSettings(), changed=["num_workers"])


@pytest.fixture
def calibrations(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """Record how calibration is asked to measure (device, threads) instead of measuring."""
    seen: list[dict[str, Any]] = []

    def fake(dag: Any, device: str = "cpu", names: Any = None, **options: Any) -> None:
        seen.append({"device": device, "threads": options.get("threads")})

    monkeypatch.setattr(codedag.calibrate, "calibrate_dag", fake)
    return seen


def test_the_tuned_workers_and_threads_decide_how_calls_are_measured(
    calibrations: list[dict[str, Any]],
) -> None:
    tracer, _ = trace_dataloader(DataLoader(_Images(), batch_size=4, num_workers=0))
    dag = tracer.dag
    OptimizerManager(k=2, target_device="cpu").optimize(dag)
    assert calibrations[-1] == {"device": "cpu", "threads": None}  # traced: no workers
    plan = OptimizerManager(k=2, target_device="cpu", loader=_section(2, 2)).optimize(dag)[
        "migration_plan"
    ]
    assert calibrations[-1] == {"device": "cpu", "threads": 2}
    assert plan["loader"]["chosen"]["num_workers"] == 2
    assert any("tuned DataLoader" in note for note in plan["notes"])
    assert MigrationPlan.from_dict(plan).loader == _section(2, 2)
    OptimizerManager(k=2, target_device="cpu", loader=_section(1, None)).optimize(dag)
    assert calibrations[-1]["threads"] == 1  # PyTorch's one thread per worker
    # Calls migrated one by one in workers run on the CPU there, whatever the target:
    cuda = OptimizerManager(k=2, target_device="cuda:0", loader=_section(2, 1)).optimize(dag)
    assert calibrations[-1]["device"] == "cpu" and cuda.measurements.problem is None


def test_codedag_optimize_takes_the_loader_of_a_tuned_plan(
    tmp_path: Path, calibrations: list[dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    tracer, _ = trace_dataloader(DataLoader(_Images(), batch_size=4, num_workers=0))
    dag_file = tracer.dag.save(tmp_path / "dag.json")
    tuned = tmp_path / "tuned.json"
    plan = {"schema_version": 2, "context_device_map": {}, "loader": _section(2, 1).model_dump()}
    tuned.write_text(json.dumps(plan))
    out = tmp_path / "out"
    args = ["optimize", str(dag_file), "--target-device", "cpu", "--out", str(out)]
    assert main([*args, "--loader", str(tuned)]) == 0
    written = json.loads((out / "migration_plan.json").read_text())
    assert written["loader"]["chosen"]["num_workers"] == 2
    assert calibrations[-1] == {"device": "cpu", "threads": 1}
    empty = tmp_path / "empty.json"
    empty.write_text(json.dumps({"context_device_map": {}}))
    capsys.readouterr()
    assert main([*args, "--loader", str(empty)]) == 2
    assert "no loader section" in capsys.readouterr().err

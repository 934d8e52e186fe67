"""The four scenarios on the CPU with small settings are told apart by their figures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from codedag.profile.api import profile_scenario
from codedag.profile.config import SCENARIOS, ProfileConfig
from codedag.profile.result import ProfileResult
from codedag.profile.scenarios import CHURN_TEMPORARIES, SYNC_SCALAR_READS, TINY_OPS_DEPTH
from codedag.util.io import atomic_write_json

SMALL: dict[str, Any] = dict(
    device="cpu",
    batch_size=8,
    image_size_px=32,
    dataset_size=64,
    num_workers=0,
    warmup_steps=2,
    profile_steps=3,
    timed_steps=3,
)
SEED_FIELDS = (
    "scenario",
    "batch_size",
    "num_workers",
    "pin_memory",
    "amp",
    "avg_step_time_s",
    "avg_dataloader_wait_s",
    "trace_dir",
)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory, one_torch_thread: None) -> dict[str, Any]:
    folder = tmp_path_factory.mktemp("profile")
    results = {}
    for scenario in SCENARIOS:
        config = ProfileConfig(
            scenario=scenario,
            trace_dir=str(folder / "traces"),
            output_json=str(folder / f"{scenario}.json"),
            **SMALL,
        )
        results[scenario] = profile_scenario(config)
    return results


def _others(runs: dict[str, ProfileResult], scenario: str) -> list[ProfileResult]:
    return [r for name, r in runs.items() if name != scenario]


def test_dataloader_has_the_largest_data_wait_share_and_is_data_bound(runs) -> None:
    share = runs["dataloader"].figures.data_wait_share
    assert all(share > r.figures.data_wait_share for r in _others(runs, "dataloader"))
    assert runs["dataloader"].diagnosis.verdict == "data-bound"
    next_steps = " ".join(runs["dataloader"].diagnosis.primary.next_steps)
    assert "workers" in next_steps and "codedag trace" in next_steps


def test_tiny_ops_has_the_most_ops_per_step(runs) -> None:
    tiny = runs["tiny_ops"].figures.ops_per_step
    assert all(tiny > r.figures.ops_per_step for r in _others(runs, "tiny_ops"))
    assert tiny - runs["dataloader"].figures.ops_per_step >= 2 * TINY_OPS_DEPTH
    assert runs["tiny_ops"].counts.op_counts["aten::mul_"] == TINY_OPS_DEPTH


def test_memory_churn_has_the_most_allocations(runs) -> None:
    churn = runs["memory_churn"].figures.allocations_per_step
    others = _others(runs, "memory_churn")
    assert all(churn > r.figures.allocations_per_step for r in others)
    # the dataloader scenario's sample allocations (main process, workers=0) are data loading,
    # left out of the step's count: churn's temporaries stand out against it
    assert churn - runs["dataloader"].figures.allocations_per_step >= 0.9 * CHURN_TEMPORARIES
    assert runs["memory_churn"].counts.op_counts["aten::zeros"] == CHURN_TEMPORARIES


def test_sync_has_the_most_synchronizations(runs) -> None:
    assert runs["sync"].figures.syncs_per_step == SYNC_SCALAR_READS
    for r in _others(runs, "sync"):
        # fused AdamW's own reads of its CPU step counters are not counted
        assert r.figures.syncs_per_step == 0
    sync_finding = next(f for f in runs["sync"].diagnosis.findings if f.bound == "sync-bound")
    assert not sync_finding.fires  # nothing waits on a CPU: reported, never the verdict
    assert "4.0 host reads" in sync_finding.evidence[0]


def test_trace_and_json_hold_what_the_seed_asks(runs, tmp_path: Path) -> None:
    for scenario, result in runs.items():
        trace = json.loads(Path(result.trace_path).read_text())
        names = {e.get("name") for e in trace["traceEvents"]}
        assert "codedag::fetch_batch" in names
        path = atomic_write_json(tmp_path / f"{scenario}.json", result.to_dict())
        document = json.loads(path.read_text())
        for field in SEED_FIELDS:
            assert field in document, field
        assert document["scenario"] == scenario
        for key in ("p50_step_time_s", "p95_step_time_s", "p95_dataloader_wait_s"):
            assert document[key] >= 0
        assert document["per_step"]["ops_per_step"] == result.figures.ops_per_step
        assert document["top_ops"] and document["top_ops"][0]["self_time_per_step_s"] > 0
        assert document["diagnosis"]["verdict"] == result.diagnosis.verdict
        assert len(result.top_ops) <= result.config.row_limit

"""The four scenarios on CUDA (skipped without a GPU): the same separation, from CUDA figures."""

from __future__ import annotations

from pathlib import Path

import pytest

from codedag.profile.api import profile_scenario
from codedag.profile.config import SCENARIOS, ProfileConfig
from codedag.profile.scenarios import SYNC_SCALAR_READS, TINY_OPS_DEPTH

pytestmark = pytest.mark.gpu


@pytest.fixture(scope="module")
def cuda_runs(tmp_path_factory: pytest.TempPathFactory) -> dict:
    folder: Path = tmp_path_factory.mktemp("profile_cuda")
    return {
        scenario: profile_scenario(
            ProfileConfig(
                scenario=scenario,
                device="cuda",
                batch_size=16,
                image_size_px=64,
                dataset_size=256,
                num_workers=0,
                pin_memory=True,
                warmup_steps=3,
                profile_steps=4,
                timed_steps=4,
                trace_dir=str(folder),
                output_json="",
            )
        )
        for scenario in SCENARIOS
    }


def test_cuda_scenarios_are_told_apart(cuda_runs: dict) -> None:
    fig = {name: r.figures for name, r in cuda_runs.items()}
    assert cuda_runs["dataloader"].diagnosis.verdict == "data-bound"
    assert fig["dataloader"].device_idle_share == max(f.device_idle_share for f in fig.values())
    # the TinyOpsBlock's in-place pairs over the same step with nothing added (memory_churn
    # launches kernels of its own too: one fill per zeroed temporary)
    base = fig["dataloader"].kernels_per_step
    assert fig["tiny_ops"].kernels_per_step >= base + 2 * TINY_OPS_DEPTH
    assert fig["tiny_ops"].kernels_per_step == max(f.kernels_per_step for f in fig.values())
    assert fig["memory_churn"].allocations_per_step == max(
        f.allocations_per_step for f in fig.values()
    )
    assert fig["sync"].syncs_per_step >= SYNC_SCALAR_READS
    assert all(f.syncs_per_step < SYNC_SCALAR_READS for n, f in fig.items() if n != "sync")
    assert fig["sync"].sync_wait_share > 0
    for r in cuda_runs.values():
        assert r.top_ops and r.figures.device_busy_share is not None
        assert Path(r.trace_path).is_file()

"""The diagnosis rules on synthetic figures."""

from __future__ import annotations

from dataclasses import replace

import pytest

from codedag.profile.diagnosis import (
    ALLOC_SHARE,
    DATA_SHARE,
    LAUNCH_SHARE_CPU,
    SYNC_SHARE,
    StepFigures,
    diagnose,
)

CPU = StepFigures(
    device="cpu",
    avg_step_time_s=0.01,
    avg_dataloader_wait_s=0.0005,
    data_wait_share=0.05,
    ops_per_step=60,
    mean_op_time_us=150.0,
    scalar_reads_per_step=0,
    syncs_per_step=0,
    allocations_per_step=100,
    allocated_bytes_per_step=8 * 2**20,
    launch_share=0.2,
    alloc_time_share=0.01,
    top_op="aten::convolution_backward",
    pin_memory=False,
    num_workers=2,
)
CUDA = replace(
    CPU,
    device="cuda",
    device_idle_share=0.02,
    kernels_per_step=150,
    mean_kernel_time_us=60.0,
    device_busy_share=0.95,
    launch_share=0.05,
    sync_wait_share=0.0,
    cuda_mallocs_per_step=0.0,
)


def test_plain_steps_are_compute_bound() -> None:
    for figures in (CPU, CUDA):
        diagnosis = diagnose(figures)
        assert diagnosis.verdict == "compute-bound"
        assert diagnosis.findings[0].bound == "compute-bound"
        assert "aten::convolution_backward" in " ".join(diagnosis.primary.evidence)


def test_data_bound_on_the_cpu_from_the_wait_share() -> None:
    d = diagnose(replace(CPU, data_wait_share=DATA_SHARE + 0.01, avg_dataloader_wait_s=0.02))
    assert d.verdict == "data-bound"
    text = " ".join(d.primary.next_steps)
    assert "workers (now 2" in text and "codedag trace" in text and "codedag optimize" in text
    assert "codedag tune" in text
    assert "pin_memory" not in text  # pinned memory only helps host-to-GPU copies
    assert diagnose(replace(CPU, data_wait_share=DATA_SHARE - 0.01)).verdict == "compute-bound"


def test_data_bound_on_cuda_reads_the_gpu_idle_share() -> None:
    # the host waits a lot, but the GPU still has queued work: not data-bound
    busy_gpu = replace(CUDA, data_wait_share=0.5, device_idle_share=0.05)
    assert diagnose(busy_gpu).verdict == "compute-bound"
    idle_gpu = replace(CUDA, data_wait_share=0.5, device_idle_share=0.4)
    d = diagnose(idle_gpu)
    assert d.verdict == "data-bound"
    assert any("pin_memory=True" in s for s in d.primary.next_steps)
    assert any("GPU idle" in e for e in d.primary.evidence)


def test_sync_bound_only_where_the_host_measurably_waits() -> None:
    d = diagnose(replace(CUDA, syncs_per_step=5, scalar_reads_per_step=5, sync_wait_share=0.3))
    assert d.verdict == "sync-bound"
    assert any(".item()" in s for s in d.primary.next_steps)
    below = replace(CUDA, syncs_per_step=1, sync_wait_share=SYNC_SHARE - 0.01)
    assert diagnose(below).verdict == "compute-bound"
    # on the CPU reads are reported but cannot bound the step
    d = diagnose(replace(CPU, syncs_per_step=4, scalar_reads_per_step=4))
    assert d.verdict == "compute-bound"
    sync = next(f for f in d.findings if f.bound == "sync-bound")
    assert not sync.fires and "on a GPU" in sync.evidence[0]


def test_launch_bound_needs_many_small_kernels_and_an_idle_gpu() -> None:
    tiny = replace(CUDA, kernels_per_step=900, mean_kernel_time_us=3.0, device_busy_share=0.3)
    tiny = replace(tiny, launch_share=0.7)
    d = diagnose(tiny)
    assert d.verdict == "launch-bound"
    assert any("torch.compile" in s for s in d.primary.next_steps)
    # an idle GPU with few, long kernels is not a launch problem
    few = replace(tiny, kernels_per_step=40, mean_kernel_time_us=500.0)
    assert diagnose(few).verdict == "compute-bound"
    cpu = replace(CPU, launch_share=LAUNCH_SHARE_CPU + 0.05, ops_per_step=900)
    assert diagnose(cpu).verdict == "launch-bound"


def test_allocation_bound() -> None:
    d = diagnose(replace(CPU, alloc_time_share=ALLOC_SHARE + 0.05, allocations_per_step=900))
    assert d.verdict == "allocation-bound"
    assert any("preallocate" in s for s in d.primary.next_steps)
    cuda = replace(CUDA, alloc_time_share=0.2, cuda_mallocs_per_step=12.0)
    d = diagnose(cuda)
    assert d.verdict == "allocation-bound"
    assert any("12.0 new cudaMalloc" in e for e in d.primary.evidence)
    assert any("expandable_segments" in s for s in d.primary.next_steps)


def test_the_largest_share_wins_when_several_fire() -> None:
    both = replace(CPU, data_wait_share=0.3, alloc_time_share=0.5)
    d = diagnose(both)
    assert d.verdict == "allocation-bound"
    assert [f.bound for f in d.findings[:2]] == ["allocation-bound", "data-bound"]
    assert d.findings[1].fires


@pytest.mark.parametrize("figures", [CPU, CUDA])
def test_to_dict_is_plain_data(figures: StepFigures) -> None:
    data = diagnose(figures).to_dict()
    assert data["verdict"] == "compute-bound"
    assert {f["bound"] for f in data["findings"]} == {
        "data-bound",
        "sync-bound",
        "launch-bound",
        "allocation-bound",
        "compute-bound",
    }

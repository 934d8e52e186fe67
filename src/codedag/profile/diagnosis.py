"""What bounds a training step: rules over measured figures, with evidence and the next step.

Each rule turns figures into the share of the step it explains and fires above a threshold:

============  =============================================================  =========
bound         share of the step                                              threshold
============  =============================================================  =========
data          CUDA: GPU idle between steps / (idle + step time);             0.20
              CPU: time in ``next(iterator)`` / wall time
sync          CUDA: host time blocked in synchronizing calls / step time      0.10
              (on the CPU nothing waits: reads are reported, never a bound)
allocation    CUDA: time in cudaMalloc/cudaFree / step time;                  0.10
              CPU: time in tensor factories (allocation + fill) / step time
launch        CUDA: 1 - kernel busy share, with >= 100 kernels per step of    0.25
              <= 20 us each; CPU: share of the step outside ops of >= 20 us   0.40
              and tensor factories (dispatch, Python and tiny-op overhead)
============  =============================================================  =========

The verdict is the bound with the largest share; with none above its threshold the step is
compute-bound (the device is busy running the model's own work).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

DATA_SHARE = 0.20
SYNC_SHARE = 0.10
ALLOC_SHARE = 0.10
LAUNCH_SHARE_CUDA = 0.25
LAUNCH_SHARE_CPU = 0.40
LAUNCH_MIN_KERNELS = 100
LAUNCH_MAX_KERNEL_US = 20.0


@dataclass
class StepFigures:
    """The figures a diagnosis reads; None where the device cannot measure one."""

    device: str
    avg_step_time_s: float
    avg_dataloader_wait_s: float
    data_wait_share: float
    ops_per_step: float
    mean_op_time_us: float
    scalar_reads_per_step: float
    syncs_per_step: float
    allocations_per_step: float
    allocated_bytes_per_step: float
    launch_share: float
    alloc_time_share: float
    device_idle_share: float | None = None
    kernels_per_step: float | None = None
    mean_kernel_time_us: float | None = None
    device_busy_share: float | None = None
    sync_wait_share: float | None = None
    cuda_mallocs_per_step: float | None = None
    top_op: str | None = None
    pin_memory: bool | None = None
    num_workers: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class Finding:
    """One candidate bound: the share of the step it explains, whether it fires, and why."""

    bound: str
    share: float
    fires: bool
    evidence: list[str] = field(default_factory=list)
    next_steps: list[str] = field(default_factory=list)


@dataclass
class Diagnosis:
    """The verdict and every finding, strongest first."""

    verdict: str
    findings: list[Finding]

    @property
    def primary(self) -> Finding:
        return next(f for f in self.findings if f.bound == self.verdict)

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "findings": [asdict(f) for f in self.findings]}


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def _data(f: StepFigures) -> Finding:
    share = f.device_idle_share if f.device_idle_share is not None else f.data_wait_share
    evidence = [
        f"waiting for the next batch: {f.avg_dataloader_wait_s * 1e3:.2f} ms per step, "
        f"{_pct(f.data_wait_share)} of wall time"
    ]
    if f.device_idle_share is not None:
        evidence.append(f"GPU idle between steps: {_pct(f.device_idle_share)} of its timeline")
    now = "" if f.num_workers is None else f" (now {f.num_workers} workers)"
    pinned = " and pin_memory" if f.device == "cuda" else ""
    steps = [
        "measure the DataLoader's settings with `codedag tune --dataloader MODULE:FACTORY "
        f"--step-ms {f.avg_step_time_s * 1e3:.0f}`: num_workers{now}, threads per worker, "
        f"prefetch, persistent workers{pinned}, written into the plan that `codedag migrate` "
        "applies"
    ]
    if f.pin_memory is False and f.device == "cuda":
        steps.append("pin_memory=True with .to(device, non_blocking=True)")
    steps.append(
        "find the slow preprocessing with `codedag trace` and move it to the GPU with "
        "`codedag optimize` (+ `codedag migrate`)"
    )
    return Finding("data-bound", share, share >= DATA_SHARE, evidence, steps)


def _sync(f: StepFigures) -> Finding:
    steps = [
        "remove per-step .item()/float()/bool() on device tensors; log every N steps",
        "accumulate metrics on the device and read them once per epoch",
    ]
    if f.sync_wait_share is None:
        evidence = [
            f"{f.scalar_reads_per_step:.1f} host reads of tensor values per step; on the CPU "
            "they cost nothing, on a GPU each one waits for all queued work"
        ]
        return Finding("sync-bound", 0.0, False, evidence, steps)
    evidence = [
        f"{f.syncs_per_step:.1f} blocking synchronizations per step "
        f"({f.scalar_reads_per_step:.1f} from reading tensor values)",
        f"host blocked in them: {_pct(f.sync_wait_share)} of the step",
    ]
    return Finding(
        "sync-bound", f.sync_wait_share, f.sync_wait_share >= SYNC_SHARE, evidence, steps
    )


def _alloc(f: StepFigures) -> Finding:
    evidence = [
        f"{f.allocations_per_step:.0f} allocations per step, "
        f"{f.allocated_bytes_per_step / 2**20:.1f} MiB allocated per step",
    ]
    if f.device == "cuda":
        evidence.append(f"time in cudaMalloc/cudaFree: {_pct(f.alloc_time_share)} of the step")
        if f.cuda_mallocs_per_step is not None:
            evidence.append(f"{f.cuda_mallocs_per_step:.1f} new cudaMalloc segments per step")
    else:
        evidence.append(f"time creating tensors (allocate + fill): {_pct(f.alloc_time_share)}")
    steps = [
        "preallocate buffers once and reuse them (out=, in-place ops, allocate outside the loop)",
        "keep temporary shapes fixed so the caching allocator can reuse blocks",
    ]
    if f.device == "cuda":
        steps.append("PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True against fragmentation")
    share = f.alloc_time_share
    return Finding("allocation-bound", share, share >= ALLOC_SHARE, evidence, steps)


def _launch(f: StepFigures) -> Finding:
    steps = [
        "fuse the chain of small ops: torch.compile the module or use fused/foreach kernels",
        "batch small tensors together; CUDA graphs for a static step",
    ]
    if f.device == "cuda" and f.kernels_per_step is not None and f.device_busy_share is not None:
        mean_us = f.mean_kernel_time_us or 0.0
        share = f.launch_share
        evidence = [
            f"{f.kernels_per_step:.0f} kernels per step, {mean_us:.1f} us each on average",
            f"GPU busy {_pct(f.device_busy_share)} of the step",
        ]
        fires = (
            share >= LAUNCH_SHARE_CUDA
            and f.kernels_per_step >= LAUNCH_MIN_KERNELS
            and mean_us <= LAUNCH_MAX_KERNEL_US
        )
        return Finding("launch-bound", share, fires, evidence, steps)
    evidence = [
        f"{f.ops_per_step:.0f} operator calls per step, {f.mean_op_time_us:.1f} us each on average",
        f"outside ops of 20 us or more: {_pct(f.launch_share)} of the step",
    ]
    fires = f.launch_share >= LAUNCH_SHARE_CPU
    return Finding("launch-bound", f.launch_share, fires, evidence, steps)


def _compute(f: StepFigures) -> Finding:
    evidence = []
    if f.device_busy_share is not None:
        evidence.append(f"GPU busy {_pct(f.device_busy_share)} of the step")
    if f.top_op:
        evidence.append(f"most time in {f.top_op}")
    steps = [
        "AMP (bf16/fp16) and channels_last for convolutions",
        "torch.compile; a larger batch if memory allows; check the top ops table",
    ]
    share = f.device_busy_share if f.device_busy_share is not None else 1.0
    return Finding("compute-bound", share, True, evidence, steps)


def diagnose(figures: StepFigures) -> Diagnosis:
    """Classify what bounds the step; findings are sorted with the verdict first."""
    candidates = [_data(figures), _sync(figures), _alloc(figures), _launch(figures)]
    firing = [c for c in candidates if c.fires]
    verdict = max(firing, key=lambda c: c.share).bound if firing else "compute-bound"
    compute = _compute(figures)
    compute.fires = verdict == "compute-bound"
    findings = [*candidates, compute]
    findings.sort(key=lambda c: (c.bound != verdict, not c.fires, -c.share))
    return Diagnosis(verdict, findings)

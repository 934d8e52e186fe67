"""Profiler events as plain records, and the per-step counts drawn from them.

The counting is a pure function of :class:`EventRecord` lists, so its rules are tested on
synthetic CUDA-style events on machines without a GPU. What is counted:

- operator calls: top-level dispatcher ops (``aten::add`` counts, the ``aten::empty`` it calls
  internally does not), outside the ``codedag::fetch_batch`` annotation (data loading in the main
  process is data wait, not step work) and outside the DataLoader's pin-memory thread;
- kernels (CUDA): device kernels, their count and summed duration; memcpy and memset apart;
- synchronizations: on CUDA the runtime calls that block the host (``cudaStreamSynchronize``,
  ``cudaDeviceSynchronize``, ``cudaEventSynchronize``, blocking ``cudaMemcpy``) and the time spent
  in them; on the CPU the host reads of tensor values (``aten::_local_scalar_dense``, behind
  ``.item()``, ``float()``, ``bool()``), each of which would be a full sync on a GPU. Reads inside
  ``Optimizer.step`` are left out: they read the optimizer's CPU-side step counters;
- allocations: ``[memory]`` events with a positive size (profile_memory), outside data loading.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

FETCH_ANNOTATION = "codedag::fetch_batch"
OPTIMIZER_STEP_PREFIX = "Optimizer.step#"
SCALAR_READ_OP = "aten::_local_scalar_dense"
SYNC_RUNTIME_CALLS = frozenset(
    {"cudaStreamSynchronize", "cudaDeviceSynchronize", "cudaEventSynchronize", "cudaMemcpy"}
)
ALLOC_RUNTIME_CALLS = frozenset({"cudaMalloc", "cudaFree", "cudaMallocAsync", "cudaFreeAsync"})
PIN_MEMORY_OPS = frozenset({"aten::pin_memory", "aten::_pin_memory", "aten::is_pinned"})
FACTORY_OPS = frozenset(
    f"aten::{name}"
    for name in (
        "empty",
        "empty_strided",
        "empty_like",
        "zeros",
        "zeros_like",
        "ones",
        "ones_like",
        "full",
        "full_like",
        "new_empty",
        "new_empty_strided",
        "new_zeros",
        "new_ones",
        "new_full",
    )
)
SMALL_OP_NS = 20_000  # an op (CPU) shorter than this is dominated by dispatch overhead
_OP_NAME = re.compile(r"^[A-Za-z_]\w*::\w")
_NOT_OPS = ("autograd::", "torch::autograd::", "ProfilerStep")


@dataclass(frozen=True)
class EventRecord:
    """One profiler event.

    Attributes:
        name: event name (``aten::mm``, a kernel's name, ``cudaLaunchKernel``, ``[memory]``).
        kind: "op", "annotation", "kernel", "memcpy", "memset", "runtime", "memory", "python"
            (with_stack) or "other".
        start_ns: start time.
        duration_ns: duration (0 for instant events such as memory records).
        thread: host thread id (device events: stream or resource id).
        nbytes: allocation size (memory events; negative for frees).
        device: "cpu" or "cuda".
    """

    name: str
    kind: str
    start_ns: int
    duration_ns: int = 0
    thread: int = 0
    nbytes: int = 0
    device: str = "cpu"

    @property
    def end_ns(self) -> int:
        return self.start_ns + self.duration_ns


@dataclass
class StepCounts:
    """Per-step counts drawn from the profiler window (all divided by the active steps)."""

    steps: int
    ops_per_step: float
    mean_op_time_us: float
    op_time_per_step_s: float
    small_op_time_per_step_s: float
    large_op_time_per_step_s: float
    factory_op_time_per_step_s: float
    scalar_reads_per_step: float
    allocations_per_step: float
    allocated_bytes_per_step: float
    kernels_per_step: float | None = None
    mean_kernel_time_us: float | None = None
    kernel_time_per_step_s: float | None = None
    memcpy_per_step: float | None = None
    runtime_syncs_per_step: float | None = None
    sync_time_per_step_s: float | None = None
    alloc_api_calls_per_step: float | None = None
    alloc_api_time_per_step_s: float | None = None
    device_allocations_per_step: float | None = None
    device_allocated_bytes_per_step: float | None = None
    op_counts: dict[str, float] = field(default_factory=dict)


def _kind_of(activity: str, name: str, user_annotation: bool) -> str:
    if name == "[memory]":
        return "memory"
    if user_annotation or activity in ("user_annotation", "gpu_user_annotation"):
        return "annotation"
    if activity == "kernel":
        return "kernel"
    if activity == "gpu_memcpy":
        return "memcpy"
    if activity == "gpu_memset":
        return "memset"
    if activity in ("cuda_runtime", "cuda_driver"):
        return "runtime"
    if activity == "python_function":
        return "python"
    if activity == "cpu_op":
        if _OP_NAME.match(name) and not name.startswith(_NOT_OPS):
            return "op"
        return "annotation"
    return "other"


_RUNTIME_CALL = re.compile(r"^cu(da)?[A-Z]")  # cudaLaunchKernel, cuLaunchKernel, ...


def activity_of(event: Any) -> str:
    """Kineto's activity type of ``event`` (``kernel``, ``cpu_op``, ``cuda_runtime``, ...).

    torch releases before ``_KinetoEvent.activity_type()`` (2.11 and older) get it from the
    event's device, name and flags, the way Kineto names those activities.
    """
    getter = getattr(event, "activity_type", None)
    if getter is not None:
        return str(getter())
    name = event.name()
    if name == "[memory]":
        return "cpu_instant_event"
    if "CUDA" in str(event.device_type()):
        if name.startswith("Memcpy"):
            return "gpu_memcpy"
        if name.startswith("Memset"):
            return "gpu_memset"
        return "gpu_user_annotation" if event.is_user_annotation() else "kernel"
    if event.is_user_annotation():
        return "user_annotation"
    is_python = getattr(event, "is_python_function", None)  # also missing from torch 2.11
    if is_python is not None and is_python():
        return "python_function"
    if _RUNTIME_CALL.match(name):
        return "cuda_runtime"
    return "cpu_op"


def records_from_profiler(prof: Any) -> list[EventRecord]:
    """Convert a stopped torch.profiler.profile's kineto events into records."""
    results = prof.profiler.kineto_results
    records = []
    for event in results.events():
        name = event.name()
        device = "cuda" if "CUDA" in str(event.device_type()) else "cpu"
        kind = _kind_of(activity_of(event), name, bool(event.is_user_annotation()))
        records.append(
            EventRecord(
                name=name,
                kind=kind,
                start_ns=int(event.start_ns()),
                duration_ns=max(0, int(event.duration_ns())),
                thread=int(event.start_thread_id()),
                nbytes=int(event.nbytes()) if kind == "memory" else 0,
                device=device,
            )
        )
    return records


def _intervals(records: Iterable[EventRecord], match: Any) -> dict[int, list[tuple[int, int]]]:
    found: dict[int, list[tuple[int, int]]] = {}
    for r in records:
        if match(r):
            found.setdefault(r.thread, []).append((r.start_ns, r.end_ns))
    return found


def _inside(r: EventRecord, intervals: dict[int, list[tuple[int, int]]]) -> bool:
    return any(a <= r.start_ns <= b for a, b in intervals.get(r.thread, ()))


def _top_level_ops(ops: Sequence[EventRecord]) -> list[EventRecord]:
    """Ops not nested in another op of the same thread."""
    top = []
    by_thread: dict[int, list[EventRecord]] = {}
    for r in ops:
        by_thread.setdefault(r.thread, []).append(r)
    for thread_ops in by_thread.values():
        thread_ops.sort(key=lambda r: (r.start_ns, -r.duration_ns))
        open_until = -1
        for r in thread_ops:
            if r.start_ns >= open_until:
                top.append(r)
                open_until = r.end_ns if r.duration_ns > 0 else r.start_ns + 1
            # a nested op ends before its parent: nothing to do
    return top


def count_steps(records: Sequence[EventRecord], steps: int, device: str) -> StepCounts:
    """Count ops, kernels, synchronizations and allocations per step in ``records``."""
    if steps < 1:
        raise ValueError(f"steps must be positive, got {steps}")
    fetch = _intervals(records, lambda r: r.kind == "annotation" and r.name == FETCH_ANNOTATION)
    optimizer = _intervals(
        records, lambda r: r.kind == "annotation" and r.name.startswith(OPTIMIZER_STEP_PREFIX)
    )
    # The DataLoader's pin-memory thread (with workers) is not step work. With no workers the
    # main thread pins inside next(iterator): it holds the fetch annotation, and stays counted.
    pinning = {r.thread for r in records if r.kind == "op" and r.name in PIN_MEMORY_OPS}
    pin_threads = pinning - fetch.keys()
    host = [r for r in records if r.device == "cpu" and r.thread not in pin_threads]
    step_host = [r for r in host if not _inside(r, fetch)]
    ops = _top_level_ops([r for r in step_host if r.kind == "op"])
    op_time = sum(r.duration_ns for r in ops)
    small = sum(
        r.duration_ns for r in ops if r.duration_ns < SMALL_OP_NS and r.name not in FACTORY_OPS
    )
    large = sum(
        r.duration_ns for r in ops if r.duration_ns >= SMALL_OP_NS and r.name not in FACTORY_OPS
    )
    factory = sum(r.duration_ns for r in ops if r.name in FACTORY_OPS)
    reads = [
        r
        for r in step_host
        if r.kind == "op" and r.name == SCALAR_READ_OP and not _inside(r, optimizer)
    ]
    allocs = [r for r in step_host if r.kind == "memory" and r.nbytes > 0]
    calls = Counter(r.name for r in ops)
    op_counts = {name: n / steps for name, n in calls.most_common()}
    counts = StepCounts(
        steps=steps,
        ops_per_step=len(ops) / steps,
        mean_op_time_us=(op_time / len(ops) / 1000.0) if ops else 0.0,
        op_time_per_step_s=op_time / steps / 1e9,
        small_op_time_per_step_s=small / steps / 1e9,
        large_op_time_per_step_s=large / steps / 1e9,
        factory_op_time_per_step_s=factory / steps / 1e9,
        scalar_reads_per_step=len(reads) / steps,
        allocations_per_step=len(allocs) / steps,
        allocated_bytes_per_step=sum(r.nbytes for r in allocs) / steps,
        op_counts=op_counts,
    )
    if device == "cuda":
        kernels = [r for r in records if r.kind == "kernel"]
        kernel_time = sum(r.duration_ns for r in kernels)
        syncs = [r for r in step_host if r.kind == "runtime" and r.name in SYNC_RUNTIME_CALLS]
        alloc_calls = [
            r for r in step_host if r.kind == "runtime" and r.name in ALLOC_RUNTIME_CALLS
        ]
        counts.kernels_per_step = len(kernels) / steps
        counts.mean_kernel_time_us = kernel_time / len(kernels) / 1000.0 if kernels else 0.0
        counts.kernel_time_per_step_s = kernel_time / steps / 1e9
        counts.memcpy_per_step = sum(1 for r in records if r.kind == "memcpy") / steps
        counts.runtime_syncs_per_step = len(syncs) / steps
        counts.sync_time_per_step_s = sum(r.duration_ns for r in syncs) / steps / 1e9
        counts.alloc_api_calls_per_step = len(alloc_calls) / steps
        counts.alloc_api_time_per_step_s = sum(r.duration_ns for r in alloc_calls) / steps / 1e9
        device_allocs = [
            r for r in records if r.kind == "memory" and r.device == "cuda" and r.nbytes > 0
        ]
        counts.device_allocations_per_step = len(device_allocs) / steps
        counts.device_allocated_bytes_per_step = sum(r.nbytes for r in device_allocs) / steps
    return counts

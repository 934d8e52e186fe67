"""Counting rules on synthetic profiler records, CUDA-style ones included (no GPU needed)."""

from __future__ import annotations

import pytest

from codedag.profile.events import (
    FETCH_ANNOTATION,
    SMALL_OP_NS,
    EventRecord,
    _kind_of,
    count_steps,
    records_from_profiler,
)

US = 1_000


def op(name: str, start_us: float, dur_us: float, thread: int = 1) -> EventRecord:
    return EventRecord(name, "op", int(start_us * US), int(dur_us * US), thread)


def ann(name: str, start_us: float, dur_us: float, thread: int = 1) -> EventRecord:
    return EventRecord(name, "annotation", int(start_us * US), int(dur_us * US), thread)


def mem(start_us: float, nbytes: int, thread: int = 1, device: str = "cpu") -> EventRecord:
    return EventRecord("[memory]", "memory", int(start_us * US), 0, thread, nbytes, device)


def test_only_top_level_ops_outside_data_loading_count() -> None:
    records = [
        ann(FETCH_ANNOTATION, 0, 100),
        op("aten::randint", 10, 20),  # data loading in the main process
        mem(12, 4096),
        op("aten::add", 200, 50),
        op("aten::empty", 205, 5),  # nested in aten::add
        mem(206, 1024),
        mem(240, -1024),  # a free is not an allocation
        op("aten::mul_", 300, 4),
    ]
    counts = count_steps(records, steps=1, device="cpu")
    assert counts.ops_per_step == 2
    assert counts.op_counts == {"aten::add": 1, "aten::mul_": 1}
    assert counts.allocations_per_step == 1
    assert counts.allocated_bytes_per_step == 1024
    assert counts.op_time_per_step_s == pytest.approx(54e-6)
    assert counts.small_op_time_per_step_s == pytest.approx(4e-6)  # 4 us < SMALL_OP_NS
    assert counts.large_op_time_per_step_s == pytest.approx(50e-6)
    assert counts.kernels_per_step is None


def test_scalar_reads_inside_the_optimizer_step_are_not_syncs() -> None:
    records = [
        op("aten::item", 0, 10),
        op("aten::_local_scalar_dense", 2, 5),
        ann("Optimizer.step#AdamW.step", 100, 100),
        op("aten::_fused_adamw_", 110, 80),
        op("aten::_local_scalar_dense", 120, 2),
    ]
    counts = count_steps(records, steps=2, device="cpu")
    assert counts.scalar_reads_per_step == 0.5


def test_factories_are_timed_apart_from_small_ops() -> None:
    records = [op("aten::zeros", i * 10, 3) for i in range(10)] + [op("aten::add_", 200, 3)]
    counts = count_steps(records, steps=1, device="cpu")
    assert counts.factory_op_time_per_step_s == pytest.approx(30e-6)
    assert counts.small_op_time_per_step_s == pytest.approx(3e-6)
    assert SMALL_OP_NS > 3 * US


def test_cuda_kernels_syncs_and_allocator_calls() -> None:
    records = [
        op("aten::mm", 0, 30),
        EventRecord("cudaLaunchKernel", "runtime", 5 * US, 3 * US, 1),
        EventRecord("sgemm_kernel", "kernel", 10 * US, 40 * US, 7, device="cuda"),
        EventRecord("vectorized_elementwise", "kernel", 60 * US, 2 * US, 7, device="cuda"),
        EventRecord("Memcpy DtoH", "memcpy", 70 * US, 1 * US, 7, device="cuda"),
        op("aten::_local_scalar_dense", 65, 40),
        EventRecord("cudaStreamSynchronize", "runtime", 70 * US, 30 * US, 1),
        EventRecord("cudaMalloc", "runtime", 120 * US, 100 * US, 1),
        mem(121, 2**20, device="cuda"),
        mem(122, 64, device="cpu"),
        # the DataLoader's pin-memory thread is not step work
        op("aten::pin_memory", 0, 50, thread=9),
        op("aten::is_pinned", 60, 1, thread=9),
    ]
    counts = count_steps(records, steps=1, device="cuda")
    assert counts.ops_per_step == 2
    assert counts.kernels_per_step == 2
    assert counts.mean_kernel_time_us == pytest.approx(21.0)
    assert counts.kernel_time_per_step_s == pytest.approx(42e-6)
    assert counts.memcpy_per_step == 1
    assert counts.runtime_syncs_per_step == 1
    assert counts.sync_time_per_step_s == pytest.approx(30e-6)
    assert counts.alloc_api_calls_per_step == 1
    assert counts.alloc_api_time_per_step_s == pytest.approx(100e-6)
    assert counts.device_allocations_per_step == 1
    assert counts.device_allocated_bytes_per_step == 2**20
    assert counts.allocations_per_step == 1  # host allocations, counted apart
    assert counts.scalar_reads_per_step == 1


def test_main_thread_pinning_with_no_workers_keeps_the_step_counted() -> None:
    # num_workers=0 with pin_memory: the main thread pins inside next(iterator); its step work
    # (the scalar read and its sync) still counts, the pinning inside the fetch does not
    records = [
        ann(FETCH_ANNOTATION, 0, 20),
        op("aten::pin_memory", 2, 10),
        op("aten::mm", 30, 30),
        op("aten::_local_scalar_dense", 65, 40),
        EventRecord("cudaStreamSynchronize", "runtime", 70 * US, 30 * US, 1),
    ]
    counts = count_steps(records, steps=1, device="cuda")
    assert counts.ops_per_step == 2
    assert counts.scalar_reads_per_step == 1
    assert counts.runtime_syncs_per_step == 1


def test_event_kinds() -> None:
    assert _kind_of("cpu_op", "aten::add", False) == "op"
    assert _kind_of("cpu_op", "autograd::engine::evaluate_function: MulBackward0", False) == (
        "annotation"
    )
    assert _kind_of("cpu_op", "MulBackward0", False) == "annotation"
    assert _kind_of("user_annotation", FETCH_ANNOTATION, True) == "annotation"
    assert _kind_of("kernel", "void at::native::foo", False) == "kernel"
    assert _kind_of("cuda_runtime", "cudaStreamSynchronize", False) == "runtime"
    assert _kind_of("gpu_memcpy", "Memcpy HtoD", False) == "memcpy"
    assert _kind_of("cpu_instant_event", "[memory]", False) == "memory"
    assert _kind_of("python_function", "torch/nn/modules/module.py(1): _call_impl", False) == (
        "python"
    )


def test_steps_must_be_positive() -> None:
    with pytest.raises(ValueError, match="positive"):
        count_steps([], steps=0, device="cpu")


class _WithoutActivityType:
    """A kineto event as torch 2.11 gives it: no ``activity_type()``, no ``is_python_function()``
    (seen on an H100 with torch 2.11.0+cu130)."""

    MISSING = ("activity_type", "is_python_function")

    def __init__(self, event: object) -> None:
        self._event = event

    def __getattr__(self, name: str) -> object:
        if name in self.MISSING:
            raise AttributeError(name)
        return getattr(self._event, name)


class _Profile:
    """A stopped profiler whose events are wrapped by ``wrap``."""

    def __init__(self, prof: object, wrap: type) -> None:
        events = [wrap(e) for e in prof.profiler.kineto_results.events()]  # type: ignore[attr-defined]
        results = type("Results", (), {"events": lambda self: events})()
        self.profiler = type("Profiler", (), {"kineto_results": results})()


def test_activity_types_are_inferred_where_torch_does_not_report_them() -> None:
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    from codedag.profile.events import activity_of

    with (
        profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof,
        record_function("step"),
    ):
        x = torch.randn(64, 64)
        (x @ x).relu().sum().item()
    events = prof.profiler.kineto_results.events()
    assert events
    for event in events:
        assert activity_of(_WithoutActivityType(event)) == event.activity_type(), event.name()
    inferred = records_from_profiler(_Profile(prof, _WithoutActivityType))
    assert [r.kind for r in inferred] == [r.kind for r in records_from_profiler(prof)]


def test_cuda_activities_are_told_apart_by_name_without_activity_type() -> None:
    from codedag.profile.events import activity_of

    class Event:
        def __init__(self, name: str, device: str, annotation: bool = False) -> None:
            self._name, self._device, self._annotation = name, device, annotation

        def name(self) -> str:
            return self._name

        def device_type(self) -> str:
            return f"DeviceType.{self._device}"

        def is_user_annotation(self) -> bool:
            return self._annotation

        def is_python_function(self) -> bool:
            return False

    assert activity_of(Event("Memcpy HtoD (Pinned -> Device)", "CUDA")) == "gpu_memcpy"
    assert activity_of(Event("Memset (Device)", "CUDA")) == "gpu_memset"
    assert activity_of(Event("void at::native::vectorized_elementwise", "CUDA")) == "kernel"
    assert activity_of(Event("ProfilerStep#3", "CUDA", annotation=True)) == "gpu_user_annotation"
    assert activity_of(Event("cudaLaunchKernel", "CPU")) == "cuda_runtime"
    assert activity_of(Event("cuLaunchKernel", "CPU")) == "cuda_runtime"
    assert activity_of(Event("aten::mm", "CPU")) == "cpu_op"

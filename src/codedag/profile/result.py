"""From a measurement to figures, a top-ops table, a diagnosis and the JSON document."""

from __future__ import annotations

import platform
import statistics
from dataclasses import dataclass, field
from typing import Any

from codedag.devices.torch_devices import gpu_name
from codedag.profile.config import ProfileConfig
from codedag.profile.diagnosis import Diagnosis, StepFigures, diagnose
from codedag.profile.events import StepCounts, count_steps, records_from_profiler
from codedag.profile.measure import Measurement, WindowTimes

SCHEMA_VERSION = 1
_HIDDEN_ROWS = (
    "ProfilerStep",
    "codedag::",
    "[memory]",
    "enumerate(DataLoader)",
    "Optimizer.",
    "autograd::engine",
)


@dataclass
class TopOp:
    """One row of the top-ops table (times are per step)."""

    name: str
    calls_per_step: float
    self_time_per_step_s: float
    total_time_per_step_s: float
    self_time_pct: float


@dataclass
class ProfileResult:
    """Everything a profiling run produced."""

    config: ProfileConfig
    figures: StepFigures
    counts: StepCounts
    diagnosis: Diagnosis
    top_ops: list[TopOp]
    timings: dict[str, float]
    trace_path: str
    program_info: dict[str, Any] = field(default_factory=dict)
    environment: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document: the flat summary fields first, then the details."""
        c = self.config
        counts = {k: v for k, v in self.counts.__dict__.items() if k != "op_counts"}
        scenario = c.scenario != "target"  # a target brings its own loader and settings
        return {
            "schema_version": SCHEMA_VERSION,
            "scenario": c.scenario,
            "device": c.device,
            "target": c.extra.get("target"),
            "batch_size": c.batch_size if scenario else None,
            "num_workers": c.num_workers if scenario else None,
            "pin_memory": c.pin_memory if scenario else None,
            "amp": c.amp if scenario else None,
            "avg_step_time_s": self.figures.avg_step_time_s,
            "avg_dataloader_wait_s": self.figures.avg_dataloader_wait_s,
            **self.timings,
            "trace_dir": c.trace_dir,
            "trace_path": self.trace_path,
            "config": c.to_dict(),
            "figures": self.figures.to_dict(),
            "per_step": counts,
            "top_ops": [op.__dict__ for op in self.top_ops],
            "diagnosis": self.diagnosis.to_dict(),
            "program": self.program_info,
            "environment": self.environment,
        }


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    if len(values) == 1:
        return values[0]
    return statistics.quantiles(values, n=100, method="inclusive")[int(q) - 1]


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else 0.0


def _timings(window: WindowTimes, prefix: str = "") -> dict[str, float]:
    return {
        f"{prefix}avg_step_time_s": _mean(window.step_s),
        f"{prefix}p50_step_time_s": _percentile(window.step_s, 50),
        f"{prefix}p95_step_time_s": _percentile(window.step_s, 95),
        f"{prefix}avg_dataloader_wait_s": _mean(window.data_wait_s),
        f"{prefix}p50_dataloader_wait_s": _percentile(window.data_wait_s, 50),
        f"{prefix}p95_dataloader_wait_s": _percentile(window.data_wait_s, 95),
    }


def top_ops(
    prof: Any, device: str, steps: int, limit: int, hidden: frozenset[str] = frozenset()
) -> list[TopOp]:
    """Ops by self device time (CUDA) or self CPU time, per step; ``hidden`` names left out."""
    rows = []
    for avg in prof.key_averages():
        if avg.key.startswith(_HIDDEN_ROWS) or avg.key in hidden:
            continue
        if device == "cuda":
            self_us = getattr(avg, "self_device_time_total", None)
            if self_us is None:  # pragma: no cover - torch < 2.4
                self_us = avg.self_cuda_time_total
            total_us = getattr(avg, "device_time_total", 0.0)
        else:
            self_us, total_us = avg.self_cpu_time_total, avg.cpu_time_total
        rows.append((avg.key, avg.count, float(self_us), float(total_us)))
    grand = sum(r[2] for r in rows) or 1.0
    rows.sort(key=lambda r: -r[2])
    return [
        TopOp(
            name=name,
            calls_per_step=count / steps,
            self_time_per_step_s=self_us / steps / 1e6,
            total_time_per_step_s=total_us / steps / 1e6,
            self_time_pct=100.0 * self_us / grand,
        )
        for name, count, self_us, total_us in rows[:limit]
        if self_us > 0
    ]


def _share(part: float | None, whole: float) -> float | None:
    if part is None:
        return None
    return min(1.0, part / whole) if whole > 0 else 0.0


def build_figures(
    m: Measurement, counts: StepCounts, config: ProfileConfig, has_loader: bool, top: str | None
) -> StepFigures:
    """Combine timings (unprofiled window) and counts (profiled window) into figures."""
    cuda = config.device == "cuda"
    timed, profiled = m.timed, m.profiled
    wait_total = sum(timed.data_wait_s)
    wall = timed.wall_s or (wait_total + sum(timed.host_step_s))
    host_step = _mean(profiled.host_step_s)
    device_step = _mean(profiled.step_s)
    idle_share = None
    if cuda and timed.device_idle_s:
        idle = sum(timed.device_idle_s)
        idle_share = _share(idle, idle + sum(timed.step_s[1:]))
    busy = _share(counts.kernel_time_per_step_s, device_step) if cuda else None
    if cuda:
        launch = 1.0 - busy if busy is not None else 0.0
    else:
        busy_host = counts.large_op_time_per_step_s + counts.factory_op_time_per_step_s
        launch = max(0.0, 1.0 - (_share(busy_host, host_step) or 0.0)) if host_step > 0 else 0.0
    if cuda:
        alloc_share = _share(counts.alloc_api_time_per_step_s, host_step) or 0.0
        delta = m.cuda_memory_delta
        steps = m.active_steps
        allocations = delta.get("allocation.all.allocated", 0) / steps if delta else None
        if allocations is None:
            allocations = counts.device_allocations_per_step or 0.0
        mallocs = delta.get("segment.all.allocated", 0) / steps if delta else None
        syncs = counts.runtime_syncs_per_step or 0.0
    else:
        alloc_share = _share(counts.factory_op_time_per_step_s, host_step) or 0.0
        allocations = counts.allocations_per_step
        mallocs = None
        syncs = counts.scalar_reads_per_step
    return StepFigures(
        device=config.device,
        avg_step_time_s=_mean(timed.step_s),
        avg_dataloader_wait_s=_mean(timed.data_wait_s),
        data_wait_share=(_share(wait_total, wall) or 0.0) if has_loader else 0.0,
        ops_per_step=counts.ops_per_step,
        mean_op_time_us=counts.mean_op_time_us,
        scalar_reads_per_step=counts.scalar_reads_per_step,
        syncs_per_step=syncs,
        allocations_per_step=allocations,
        allocated_bytes_per_step=(
            counts.device_allocated_bytes_per_step or 0.0
            if cuda
            else counts.allocated_bytes_per_step
        ),
        launch_share=launch,
        alloc_time_share=alloc_share,
        device_idle_share=idle_share if has_loader else None,
        kernels_per_step=counts.kernels_per_step,
        mean_kernel_time_us=counts.mean_kernel_time_us,
        device_busy_share=busy,
        sync_wait_share=_share(counts.sync_time_per_step_s, host_step) if cuda else None,
        cuda_mallocs_per_step=mallocs,
        top_op=top,
        pin_memory=config.pin_memory if config.scenario != "target" else None,
        num_workers=config.num_workers if config.scenario != "target" else None,
    )


def _environment(device: str) -> dict[str, Any]:
    import torch

    env: dict[str, Any] = {
        "torch": torch.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
    }
    if device == "cuda":
        env["gpu"] = gpu_name()
        env["cuda"] = torch.version.cuda
    return env


def summarize(
    m: Measurement, config: ProfileConfig, has_loader: bool, program_info: dict[str, Any]
) -> ProfileResult:
    """Analyse a measurement: counts, figures, top ops and the diagnosis."""
    records = records_from_profiler(m.profiler)
    counts = count_steps(records, m.active_steps, config.device)
    python_frames = frozenset(r.name for r in records if r.kind == "python")  # with_stack
    rows = top_ops(m.profiler, config.device, m.active_steps, config.row_limit, python_frames)
    figures = build_figures(m, counts, config, has_loader, rows[0].name if rows else None)
    timings = {
        **_timings(m.timed),
        **_timings(m.profiled, "profiled_"),
        "wall_time_per_step_s": m.timed.wall_s / max(1, len(m.timed.step_s)),
    }
    if config.device == "cuda":
        timings["host_avg_step_time_s"] = _mean(m.timed.host_step_s)
    info = {**program_info, "iterator_restarts": m.iterator_restarts}
    return ProfileResult(
        config=config,
        figures=figures,
        counts=counts,
        diagnosis=diagnose(figures),
        top_ops=rows,
        timings=timings,
        trace_path=str(m.trace_path),
        program_info=info,
        environment=_environment(config.device),
    )

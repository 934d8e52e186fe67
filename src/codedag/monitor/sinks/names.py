"""The names codedag's figures get in each tool, in one table (docs/monitoring.md lists them).

TensorBoard groups scalars into cards by the tag's first segment (``step/...``, ``system/...``,
``gpu0/...``); MLflow keeps one flat key per metric, with machine figures under ``system/`` the
way its own system metrics are named (``system/gpu_0_utilization_pct``). Units are in the names.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class MetricName:
    """One figure's name in each tool.

    Attributes:
        tensorboard: the TensorBoard tag.
        mlflow: the MLflow metric key.
        meaning: what it is, for the docs.
    """

    tensorboard: str
    mlflow: str
    meaning: str


STEP: dict[str, MetricName] = {
    "batch_time_ms": MetricName(
        "step/batch_time_ms", "batch_time_ms", "training step, start_batch to end_batch"
    ),
    "data_wait_ms": MetricName(
        "step/data_wait_ms", "data_wait_ms", "wait for the batch (the input pipeline)"
    ),
    "step_time_ms": MetricName("step/step_time_ms", "step_time_ms", "data wait + batch time"),
    "data_wait_share_pct": MetricName(
        "step/data_wait_share_pct",
        "data_wait_share_pct",
        "share of the step spent waiting for data",
    ),
    "samples_per_s": MetricName(
        "step/samples_per_s", "samples_per_s", "samples over step time (when batch sizes are known)"
    ),
}
"""Per-step figures; each point is the mean over the steps since the previous point."""

TRAIN: dict[str, MetricName] = {
    "loss": MetricName("train/loss", "loss", "logged loss (mean since the previous point)"),
    "accuracy": MetricName(
        "train/accuracy", "accuracy", "logged accuracy (mean since the previous point)"
    ),
}

SYSTEM: dict[str, MetricName] = {
    "cpu_usage": MetricName(
        "system/cpu_pct", "system/cpu_pct", "container (or host) CPU, % of the job's CPUs"
    ),
    "memory_usage": MetricName(
        "system/memory_pct", "system/memory_pct", "container (or host) memory, % of its limit"
    ),
    "memory_used_mb": MetricName(
        "system/memory_used_mb", "system/memory_used_mb", "container (or host) memory used"
    ),
    "process_cpu_usage": MetricName(
        "system/process_cpu_pct", "system/process_cpu_pct", "training process and its workers"
    ),
    "process_memory_mb": MetricName(
        "system/process_memory_mb", "system/process_memory_mb", "RSS of the process tree"
    ),
    "workers_cpu_usage": MetricName(
        "workers/cpu_pct", "system/workers_cpu_pct", "DataLoader workers' CPU (child processes)"
    ),
    "workers_memory_mb": MetricName(
        "workers/memory_mb", "system/workers_memory_mb", "DataLoader workers' RSS"
    ),
    "workers": MetricName("workers/count", "system/workers", "DataLoader worker processes alive"),
}
"""Resource series (the results file's names) -> their names in each tool."""

GPU: dict[str, MetricName] = {
    "gpu_usage": MetricName("gpu{i}/utilization_pct", "system/gpu_{i}_utilization_pct", ""),
    "gpu_memory": MetricName("gpu{i}/memory_used_mb", "system/gpu_{i}_memory_used_mb", ""),
    "gpu_power_w": MetricName("gpu{i}/power_w", "system/gpu_{i}_power_w", ""),
    "gpu_temperature_c": MetricName("gpu{i}/temperature_c", "system/gpu_{i}_temperature_c", ""),
    "gpu_energy_j": MetricName(
        "gpu{i}/energy_j", "system/gpu_{i}_energy_j", "NVML energy counter since the mode started"
    ),
}
"""Per-GPU resource series; ``{i}`` is the GPU's index."""

LIMITS: dict[str, MetricName] = {
    "cpu_limit_cpus": MetricName(
        "system/cpu_limit_cpus", "cpu_limit_cpus", "the container's CPU quota (absent: none)"
    ),
    "cpu_capacity_cpus": MetricName(
        "system/cpu_capacity_cpus", "cpu_capacity_cpus", "CPUs the job may use (the % base)"
    ),
}
"""Constants of a mode: TensorBoard scalars at step 0, MLflow parameters."""


def resource_name(series: str) -> MetricName | None:
    """The names of a resource series (``cpu_usage``, ``gpu_usage/0``); ``None`` if unknown."""
    base, _, device = series.partition("/")
    if not device:
        return SYSTEM.get(base)
    names = GPU.get(base)
    if names is None:
        return None
    return MetricName(
        names.tensorboard.format(i=device), names.mlflow.format(i=device), names.meaning
    )


def summary_name(figure: str) -> MetricName:
    """The names of a summary figure (:func:`codedag.monitor.records.summary_figures`)."""
    return MetricName(f"summary/{figure}", f"summary/{figure}", "")

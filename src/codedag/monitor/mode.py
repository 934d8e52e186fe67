"""One mode's measurements (timer, metrics, resources, raw streams) and its part of the results."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codedag.monitor.metrics import MetricsLogger
from codedag.monitor.model import ModeResults
from codedag.monitor.resources import ResourceMonitor
from codedag.monitor.timer import Timer


def plain_config(value: object, depth: int = 0) -> Any:
    """A JSON-safe copy of a config (paths, devices, dtypes become strings; NaN becomes null)."""
    if isinstance(value, bool | int | str) or value is None:
        return value
    if isinstance(value, float):
        return value if value == value and abs(value) != float("inf") else None
    if depth > 8:
        return repr(value)
    if isinstance(value, dict):
        return {str(k): plain_config(v, depth + 1) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [plain_config(v, depth + 1) for v in value]
    if hasattr(value, "item") and callable(value.item):
        try:
            return plain_config(value.item(), depth + 1)
        except Exception:
            return repr(value)
    return str(value)


@dataclass(eq=False)
class ModeRecord:
    """Everything measured in one mode."""

    name: str
    config: dict[str, Any]
    timer: Timer
    metrics: MetricsLogger
    resources: ResourceMonitor | None
    files: dict[str, str | None]
    describe: dict[str, Any]
    status: str = field(default="running", init=False)
    error: str | None = field(default=None, init=False)
    # time.time looked up at each start, as a patched clock (freezegun) expects
    started_at: float = field(default_factory=lambda: time.time(), init=False)
    ended_at: float | None = field(default=None, init=False)

    def results(self) -> ModeResults:
        """The mode as the results file holds it (a running mode has status ``running``)."""
        parts = measured_parts(self.timer, self.metrics, self.resources)
        return ModeResults.model_validate(
            {
                "config": self.config,
                "status": self.status,
                "error": self.error,
                "started_at": self.started_at,
                "ended_at": self.ended_at,
                **parts,
                "resources": self.describe,
                "files": self.files,
            }
        )


def measured_parts(
    timer: Timer, metrics: MetricsLogger, resources: ResourceMonitor | None
) -> dict[str, Any]:
    """A mode's measured keys of the results file: ``batch_times``, ``data_wait_times``,
    ``resource_usage``, ``metrics``, ``summary`` and ``downsampling``, in the file's order."""
    batch_times, waits, stride = timer.batch_series()
    summary = timer.summary()
    summary.update(metrics.summary())
    usage: dict[str, Any] = {}
    downsampling: dict[str, Any] = {"batch_times": stride, **metrics.strides()}
    if resources is not None:
        usage = resources.usage()
        res_summary = resources.summary()
        downsampling["resource_usage"] = res_summary.pop("max_stride")
        summary["resources"] = res_summary
    return {
        "batch_times": batch_times,
        "data_wait_times": waits,
        "resource_usage": usage,
        "metrics": metrics.series(),
        "summary": summary,
        "downsampling": downsampling,
    }


def batch_size_of(item: object, n_samples: Callable[[Any], int] | None) -> int:
    """Samples in a batch: ``n_samples(item)``, else the leading dimension of its first tensor."""
    if n_samples is not None:
        return int(n_samples(item))
    first = item
    if isinstance(first, dict) and first:  # {"image": tensor, "label": tensor}
        first = next(iter(first.values()))
    if isinstance(first, list | tuple) and first:
        first = first[0]
    shape = getattr(first, "shape", None)
    try:
        return int(shape[0]) if shape is not None and len(shape) > 0 else 0
    except (TypeError, IndexError):
        return 0


class NullProbe:
    """Stands in when no probe can be built: empty samples, and the reason in ``describe``."""

    def __init__(self, reason: str) -> None:
        self.reason = reason

    def sample(self) -> Any:
        from codedag.monitor.probes import ResourceSample

        return ResourceSample(timestamp=time.time())

    def describe(self) -> dict[str, Any]:
        return {"error": self.reason}

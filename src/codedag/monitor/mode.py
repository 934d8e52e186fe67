"""One mode's measurements (timer, metrics, resources, raw streams) and its JSON form."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from codedag.monitor.metrics import MetricsLogger
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


class ModeRecord:
    """Everything measured in one mode."""

    def __init__(
        self,
        name: str,
        config: dict[str, Any],
        timer: Timer,
        metrics: MetricsLogger,
        resources: ResourceMonitor | None,
        files: dict[str, str | None],
        describe: dict[str, Any],
    ) -> None:
        self.name = name
        self.config = config
        self.timer = timer
        self.metrics = metrics
        self.resources = resources
        self.files = files
        self.describe = describe
        self.status = "running"
        self.error: str | None = None
        self.started_at = time.time()
        self.ended_at: float | None = None

    def to_dict(self) -> dict[str, Any]:
        batch_times, waits, stride = self.timer.batch_series()
        summary = self.timer.summary()
        summary.update(self.metrics.summary())
        usage: dict[str, Any] = {}
        downsampling: dict[str, Any] = {"batch_times": stride, **self.metrics.strides()}
        if self.resources is not None:
            usage = self.resources.usage()
            res_summary = self.resources.summary()
            downsampling["resource_usage"] = res_summary.pop("max_stride")
            summary["resources"] = res_summary
        return {
            "config": self.config,
            "status": self.status,
            "error": self.error,
            "started_at": self.started_at,
            "ended_at": self.ended_at,
            "batch_times": batch_times,
            "data_wait_times": waits,
            "resource_usage": usage,
            "metrics": self.metrics.series(),
            "summary": summary,
            "resources": self.describe,
            "downsampling": downsampling,
            "files": self.files,
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

"""What a monitor builds when a mode starts: the mode's unique name, its step timer and metrics
logger feeding the sinks, and its resource sampler with the probe it reads (never failing the
run: a probe that cannot be built records nothing)."""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Collection
from typing import Any

from codedag.monitor.metrics import MetricsLogger
from codedag.monitor.mode import NullProbe
from codedag.monitor.resources import Probe, ResourceMonitor
from codedag.monitor.sinks.base import SinkHub
from codedag.monitor.timer import RECORD_BLOCK, Timer

log = logging.getLogger("codedag.monitor.experiment")  # what the monitor itself logs

# Records buffered before the training thread folds them itself while the sampler's thread folds
# every interval: reached only when steps outpace it (above 8192 steps per sampling interval).
SAMPLED_RECORD_BLOCK = 8192


def new_mode_name(name: str, recorded: Collection[str]) -> str:
    """``name``, or ``name_2``, ``name_3`` ... when a mode of that name was recorded."""
    if name not in recorded:
        return name
    n = 2
    while f"{name}_{n}" in recorded:
        n += 1
    log.warning("mode %r already recorded; recording this one as %r", name, f"{name}_{n}")
    return f"{name}_{n}"


def recorders(
    hub: SinkHub,
    name: str,
    cuda_timing: str,
    resource_interval: float | None,
    *,
    warmup_batches: int,
    downsample_capacity: int,
) -> tuple[Timer, MetricsLogger]:
    """The step timer and the metrics logger of a new mode, feeding the sinks' hub."""
    block = RECORD_BLOCK if resource_interval is None else SAMPLED_RECORD_BLOCK
    timer = Timer(
        cuda_timing,
        on_steps=functools.partial(hub.log_steps, name),
        warmup_batches=warmup_batches,
        downsample_capacity=downsample_capacity,
        record_block=block,
    )
    metrics = MetricsLogger(
        functools.partial(hub.log_metrics, name), downsample_capacity, record_block=block
    )
    return timer, metrics


def _fold(timer: Timer, metrics: MetricsLogger) -> None:
    """Fold a mode's buffered steps and logged values into its statistics and the sinks."""
    timer.fold()
    metrics.fold()


def make_probe(probe_factory: Callable[[], Probe] | None) -> Probe:
    """The resource probe of a mode: the factory's, else a :class:`SystemProbe`."""
    if probe_factory is not None:
        return probe_factory()
    try:
        from codedag.monitor.system import SystemProbe

        return SystemProbe()
    except Exception as error:  # never stop training because a probe cannot be built
        log.warning("resource probe unavailable (%s); recording no resource samples", error)
        return NullProbe(str(error))


def resource_sampler(
    probe: Probe,
    hub: SinkHub,
    name: str,
    interval: float,
    downsample_capacity: int,
    folds: tuple[Timer, MetricsLogger],
) -> tuple[ResourceMonitor, dict[str, Any]]:
    """A mode's resource sampler (not started), which also folds the mode's buffers every
    interval, and what its probe says of the machine."""
    try:
        describe = probe.describe()
    except Exception as error:
        describe = {"error": f"describe() failed: {error}"}
    resources = ResourceMonitor(
        interval,
        probe=probe,
        on_sample=functools.partial(hub.log_resources, name),
        downsample_capacity=downsample_capacity,
        on_tick=functools.partial(_fold, *folds),
    )
    return resources, describe

"""The consumer's time per step: what "fast enough" means for a loader.

A loader only has to deliver a batch before the training step that consumes it is done. That
step time comes from the user (``--step-ms``), from a training run measured by
:class:`~codedag.monitor.ExperimentMonitor` (its results file: the median batch time, which
excludes the wait for data), or from timing a step function on real batches.
"""

from __future__ import annotations

import functools
import os
import statistics
from collections.abc import Callable
from typing import Any

from codedag.errors import ConfigError
from codedag.measure.clock import Stopwatch
from codedag.measure.summary import Timing


def step_from_results(path: str | os.PathLike[str], mode: str | None = None) -> tuple[float, str]:
    """The median compute time per step of a mode of a results file, in seconds, and its source.

    Args:
        path: ``results.json`` written by the monitor (``codedag experiment``, ``codedag demo``).
        mode: the mode to read (default: ``baseline``, else the first).

    Raises:
        SchemaError: the file cannot be read as results.
        ConfigError: the mode is missing or has no batch times.
    """
    from codedag.monitor.compare import pick_baseline
    from codedag.monitor.results import load_results

    results = load_results(path)
    name = pick_baseline(results.modes, mode)
    if name is None:
        raise ConfigError(f"{path}: the results hold no mode")
    chosen = results.modes[name]
    batch = chosen.summary.batch_time
    step = None if batch is None else batch.p50
    if step is None or step <= 0:
        times = [p[1] for p in chosen.batch_times]
        if not times:
            raise ConfigError(f"{path}: mode {name!r} has no batch times")
        step = statistics.median(float(t) for t in times)
    return float(step), f"median batch time of mode {name!r} in {path}"


def time_step(step: Callable[[Any], Any], batches: list[Any], warmup: int = 1) -> tuple[float, str]:
    """The median time of ``step(batch)`` over ``batches`` (after ``warmup`` calls), seconds.

    Each call is timed by :class:`codedag.measure.Stopwatch`; CUDA work is synchronized around
    each call so asynchronous kernels are counted.
    """
    from codedag.devices.torch_devices import cuda_available, device_sync

    if len(batches) <= warmup:
        raise ConfigError(f"timing a step needs more than {warmup} batch(es), got {len(batches)}")
    watch = Stopwatch(sync=device_sync("cuda" if cuda_available() else "cpu"))
    times_ns = [watch(functools.partial(step, batch)) for batch in batches]
    timing = Timing.of(times_ns[warmup:])
    name = getattr(step, "__qualname__", type(step).__name__)
    return timing.median_ns / 1e9, f"median of {timing.samples} calls of {name}"

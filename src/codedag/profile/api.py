"""Profile a built-in bottleneck scenario or a user's own training step.

The user contract for ``--target module:function``: ``function`` takes no argument and returns
either

- a callable ``step()`` that runs one training step and fetches its own data (the data wait is then
  not measured), or
- a tuple ``(step, batches)``: ``batches`` is an iterable of batches (a DataLoader) and
  ``step(batch)`` runs one training step on one batch. The profiler times ``next(iterator)``
  as the data wait and restarts the iterator when an epoch ends, or
- a :class:`~codedag.profile.scenarios.StepProgram`.

The step should move the batch to the device itself and must not synchronize for timing: codedag
times it with CUDA events. The module must be importable (the CLI adds the working folder to
``sys.path``, as ``python -m`` does).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from codedag.devices.torch_devices import require_device
from codedag.errors import CodeDAGError, ConfigError, ExperimentError
from codedag.profile.config import ProfileConfig
from codedag.profile.program import StepProgram
from codedag.profile.result import ProfileResult, summarize
from codedag.util.targets import load_target as load_callable

log = logging.getLogger(__name__)

ProgressCallback = Callable[[str, int, int], None]


def _seed(config: ProfileConfig) -> None:
    from codedag.util.seeding import seed_everything

    seed_everything(config.seed, deterministic=False)


def _measure(program: StepProgram, config: ProfileConfig, progress: ProgressCallback | None):
    from codedag.profile.measure import run_measurement

    Path(config.trace_dir).mkdir(parents=True, exist_ok=True)
    threads_before = None
    if config.cpu_threads is not None:
        import torch

        threads_before = torch.get_num_threads()
        torch.set_num_threads(config.cpu_threads)
    try:
        measurement = run_measurement(program, config, progress)
    except CodeDAGError:
        raise
    except Exception as error:
        raise ExperimentError(
            f"{program.name}: the step or its data raised {type(error).__name__}: {error} "
            "(run with -v for the traceback)"
        ) from error
    finally:
        if threads_before is not None:
            torch.set_num_threads(threads_before)
    return summarize(measurement, config, program.batches is not None, program.info)


def profile_scenario(
    config: ProfileConfig, progress: ProgressCallback | None = None
) -> ProfileResult:
    """Run one of the four scenarios under torch.profiler and diagnose it.

    Args:
        config: the run's settings; ``config.scenario`` names the scenario.
        progress: optional callback ``(phase, done, total)`` after every step.

    Returns:
        The figures, top ops, diagnosis and the path of the Chrome/Perfetto trace.
    """
    if config.scenario == "target":
        raise ConfigError("profile_scenario needs a scenario name; use profile_target for a target")
    require_device(config.device)  # DeviceError without CUDA: run with device "cpu"
    _seed(config)
    from codedag.profile.scenarios import build_scenario

    program = build_scenario(config)
    return _measure(program, config, progress)


def load_target(spec: str) -> StepProgram:
    """Import ``module:function`` (or ``script.py:function``), call it and wrap what it returns
    in a StepProgram."""
    factory = load_callable(spec, "--target")
    attr = spec.rpartition(":")[2]
    try:
        made = factory()
    except Exception as error:
        raise ExperimentError(f"target factory {spec} raised {error!r}") from error
    name = attr.replace(".", "_")
    if isinstance(made, StepProgram):
        return made
    if callable(made):
        return StepProgram(step=made, batches=None, name=name, info={"target": spec})
    if isinstance(made, tuple) and len(made) == 2 and callable(made[0]):
        step, batches = made
        if not hasattr(batches, "__iter__"):
            raise ConfigError(
                f"target {spec} returned (step, {type(batches).__name__}): expected an iterable "
                "of batches as the second item"
            )
        return StepProgram(step=step, batches=batches, name=name, info={"target": spec})
    raise ConfigError(
        f"target {spec} returned {type(made).__name__}: expected step, (step, batches) or a "
        "StepProgram"
    )


def profile_target(
    spec: str, config: ProfileConfig, progress: ProgressCallback | None = None
) -> ProfileResult:
    """Profile a user's training step given as ``module:function`` (see the module docstring)."""
    require_device(config.device)  # DeviceError without CUDA: run with device "cpu"
    _seed(config)
    program = load_target(spec)
    config = replace(config, scenario="target", extra={**config.extra, "target": spec})
    return _measure(program, config, progress)

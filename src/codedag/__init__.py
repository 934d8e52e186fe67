"""codedag: find and remove input-pipeline bottlenecks in PyTorch training.

Trace a data pipeline into an execution DAG, partition it, move the CPU-heavy preprocessing onto
the GPU, and measure what that changes. Public names are imported lazily, so ``import codedag``
stays cheap and has no side effects (no CUDA, no NVML, no patches).
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Public name -> module that defines it. Keep sorted by name.
_EXPORTS: dict[str, str] = {
    "BatchSettings": "codedag.energy.settings",
    "CodeDAGError": "codedag.errors",
    "ConfigError": "codedag.errors",
    "DeviceError": "codedag.errors",
    "Diagnosis": "codedag.profile.diagnosis",
    "EnergySession": "codedag.energy.session",
    "Executor": "codedag.energy.executors",
    "GpuEnergyMeter": "codedag.energy.gpu_meter",
    "LocalExecutor": "codedag.energy.executors",
    "ModelsConfig": "codedag.energy.config",
    "Mutator": "codedag.energy.mutation",
    "ProfileConfig": "codedag.profile.config",
    "ProfileResult": "codedag.profile.result",
    "ResultsDB": "codedag.energy.store",
    "SchemaError": "codedag.errors",
    "SessionOptions": "codedag.energy.session",
    "StepFigures": "codedag.profile.diagnosis",
    "StepProgram": "codedag.profile.program",
    "detect_gpus": "codedag.monitor.devices.gpus",
    "diagnose": "codedag.profile.diagnosis",
    "load_models_config": "codedag.energy.config",
    "load_settings": "codedag.energy.settings",
    "pareto_front": "codedag.energy.analysis",
    "plan_jobs": "codedag.energy.plan",
    "profile_scenario": "codedag.profile.api",
    "profile_target": "codedag.profile.api",
    "seed_everything": "codedag.util.seeding",
    "setup_logging": "codedag.util.logs",
}

__all__ = sorted([*_EXPORTS, "__version__"])


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'codedag' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return __all__

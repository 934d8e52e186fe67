"""codedag: find and remove input-pipeline bottlenecks in PyTorch training.

Trace a data pipeline into an execution DAG, partition it, move the CPU-heavy preprocessing onto
the GPU, and measure what that changes. Public names are imported lazily, so ``import codedag``
stays cheap and has no side effects (no CUDA, no NVML, no patches).
"""

from __future__ import annotations

import importlib
from typing import Any

from codedag.version import __version__ as __version__

# Public name -> module that defines it. Keep sorted by name.
_EXPORTS: dict[str, str] = {
    "BatchSettings": "codedag.energy.settings",
    "CallNode": "codedag.graph.model",
    "ClusterNode": "codedag.optimize.coarse",
    "CoarsenedDAG": "codedag.optimize.coarse",
    "CodeDAGError": "codedag.errors",
    "ConfigError": "codedag.errors",
    "CostModel": "codedag.optimize.costs",
    "DAGBuilder": "codedag.trace.builder",
    "DeviceError": "codedag.errors",
    "Diagnosis": "codedag.profile.diagnosis",
    "EnergySession": "codedag.energy.session",
    "EnhancedTracer": "codedag.trace.tracer",
    "ExecutionDAG": "codedag.graph.model",
    "Executor": "codedag.energy.executors",
    "ExperimentMonitor": "codedag.monitor.experiment",
    "FactoryOp": "codedag.backends.registry",
    "FunctionFilter": "codedag.trace.filter",
    "GpuEnergyMeter": "codedag.energy.gpu_meter",
    "GraphCoarsening": "codedag.optimize.coarsen",
    "GraphError": "codedag.errors",
    "IterativeOptimizer": "codedag.optimize.refine",
    "KWayPartitioner": "codedag.optimize.partition",
    "LocalExecutor": "codedag.energy.executors",
    "MetricsLogger": "codedag.monitor.metrics",
    "MigrationError": "codedag.errors",
    "ModelsConfig": "codedag.energy.config",
    "MonitorCallback": "codedag.monitor.callbacks",
    "MoveOnly": "codedag.backends.registry",
    "Mutator": "codedag.energy.mutation",
    "OpSpec": "codedag.backends.registry",
    "OptimizerManager": "codedag.optimize.manager",
    "Partition": "codedag.optimize.partition",
    "PatchInjector": "codedag.migrate.injector",
    "PipelineMigrator": "codedag.migrate.api",
    "ProfileConfig": "codedag.profile.config",
    "ProfileResult": "codedag.profile.result",
    "RayExecutor": "codedag.energy.ray_executor",
    "Registry": "codedag.backends.registry",
    "ReplayProbe": "codedag.monitor.replay",
    "ResourceMonitor": "codedag.monitor.resources",
    "ResultsDB": "codedag.energy.store",
    "SchemaError": "codedag.errors",
    "SessionOptions": "codedag.energy.session",
    "StandardOp": "codedag.backends.registry",
    "StepFigures": "codedag.profile.diagnosis",
    "StepProgram": "codedag.profile.program",
    "Strategy": "codedag.backends.registry",
    "SystemProbe": "codedag.monitor.system",
    "Timer": "codedag.monitor.timer",
    "TraceError": "codedag.errors",
    "UniversalWrapper": "codedag.migrate.wrapper",
    "UnsupportedOperation": "codedag.errors",
    "ValueNode": "codedag.graph.model",
    "canonical_name": "codedag.backends.names",
    "compare_modes": "codedag.monitor.compare",
    "detect_gpus": "codedag.devices.gpus",
    "diagnose": "codedag.profile.diagnosis",
    "is_migratable": "codedag.backends.registry",
    "list_supported_functions": "codedag.backends.registry",
    "load_models_config": "codedag.energy.config",
    "load_results": "codedag.monitor.results",
    "load_settings": "codedag.energy.settings",
    "pareto_front": "codedag.energy.analysis",
    "plan_jobs": "codedag.energy.jobs",
    "plot_results": "codedag.monitor.plots",
    "profile_scenario": "codedag.profile.api",
    "profile_target": "codedag.profile.api",
    "rebuild_results": "codedag.monitor.rebuild",
    "seed_everything": "codedag.util.seeding",
    "setup_logging": "codedag.util.logs",
    "trace_dataloader": "codedag.trace.tracer",
    "trace_function": "codedag.trace.tracer",
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

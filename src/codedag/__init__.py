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
    "CallNode": "codedag.graph.model",
    "ClusterNode": "codedag.optimize.coarse",
    "CoarsenedDAG": "codedag.optimize.coarse",
    "CodeDAGError": "codedag.errors",
    "ConfigError": "codedag.errors",
    "CostModel": "codedag.optimize.costs",
    "DAGBuilder": "codedag.trace.builder",
    "DeviceError": "codedag.errors",
    "EnhancedTracer": "codedag.trace.tracer",
    "ExecutionDAG": "codedag.graph.model",
    "FactoryOp": "codedag.migrate.registry",
    "FunctionFilter": "codedag.trace.filter",
    "GraphCoarsening": "codedag.optimize.coarsen",
    "GraphError": "codedag.errors",
    "IterativeOptimizer": "codedag.optimize.refine",
    "KWayPartitioner": "codedag.optimize.partition",
    "MigrationError": "codedag.errors",
    "MoveOnly": "codedag.migrate.registry",
    "OpSpec": "codedag.migrate.registry",
    "OptimizerManager": "codedag.optimize.manager",
    "Partition": "codedag.optimize.partition",
    "PatchInjector": "codedag.migrate.injector",
    "PipelineMigrator": "codedag.migrate.api",
    "Registry": "codedag.migrate.registry",
    "SchemaError": "codedag.errors",
    "StandardOp": "codedag.migrate.registry",
    "Strategy": "codedag.migrate.registry",
    "TraceError": "codedag.errors",
    "UniversalWrapper": "codedag.migrate.wrapper",
    "UnsupportedOperation": "codedag.errors",
    "ValueNode": "codedag.graph.model",
    "canonical_name": "codedag.trace.names",
    "detect_gpus": "codedag.monitor.devices.gpus",
    "is_migratable": "codedag.migrate.registry",
    "list_supported_functions": "codedag.migrate.registry",
    "seed_everything": "codedag.util.seeding",
    "setup_logging": "codedag.util.logs",
    "trace_dataloader": "codedag.trace.dataloader",
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

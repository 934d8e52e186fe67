"""The public API: seed names stay importable from ``codedag`` and importing has no side effects."""

from __future__ import annotations

import subprocess
import sys

import codedag

# Names users import from codedag. Add to this list as capabilities land; never remove.
PUBLIC_NAMES = [
    "OptimizerManager",
    "GraphCoarsening",
    "KWayPartitioner",
    "IterativeOptimizer",
    "Partition",
    "CoarsenedDAG",
    "ClusterNode",
    "CostModel",
    "CodeDAGError",
    "ConfigError",
    "SchemaError",
    "DeviceError",
    "detect_gpus",
    "seed_everything",
    "setup_logging",
    "CallNode",
    "DAGBuilder",
    "EnhancedTracer",
    "ExecutionDAG",
    "FunctionFilter",
    "GraphError",
    "TraceError",
    "ValueNode",
    "canonical_name",
    "trace_dataloader",
    "trace_function",
    "PipelineMigrator",
    "OpSpec",
    "Registry",
    "Strategy",
    "MoveOnly",
    "StandardOp",
    "FactoryOp",
    "UniversalWrapper",
    "PatchInjector",
    "list_supported_functions",
    "is_migratable",
    "MigrationError",
    "UnsupportedOperation",
    "Diagnosis",
    "ProfileConfig",
    "ProfileResult",
    "StepFigures",
    "StepProgram",
    "diagnose",
    "profile_scenario",
    "profile_target",
    "BatchSettings",
    "EnergySession",
    "Executor",
    "GpuEnergyMeter",
    "LocalExecutor",
    "ModelsConfig",
    "Mutator",
    "ResultsDB",
    "SessionOptions",
    "load_models_config",
    "load_settings",
    "pareto_front",
    "plan_jobs",
    "ExperimentMonitor",
    "Timer",
    "ResourceMonitor",
    "MetricsLogger",
    "MonitorCallback",
    "SystemProbe",
    "ReplayProbe",
    "load_results",
    "plot_results",
    "compare_modes",
    "rebuild_results",
    "Executor",
    "LocalExecutor",
    "RayExecutor",
    "MigrationPlan",
    "OptimizeResult",
    "RunResults",
    "tune_loader",
    "accelerate",
]


def test_all_is_sorted_and_complete() -> None:
    assert codedag.__all__ == sorted(codedag.__all__)
    for name in PUBLIC_NAMES:
        assert name in codedag.__all__, name


def test_every_exported_name_resolves() -> None:
    for name in codedag.__all__:
        assert getattr(codedag, name) is not None, name


def test_import_has_no_heavy_side_effects() -> None:
    code = (
        "import sys, codedag; "
        "heavy = [m for m in ('torch', 'pynvml', 'cv2', 'matplotlib') if m in sys.modules]; "
        "print(','.join(heavy)); print(sys.getprofile() is None and sys.gettrace() is None)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    heavy, hooks_clear = out.stdout.split("\n")[:2]
    assert heavy == ""
    assert hooks_clear == "True"

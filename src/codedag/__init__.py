"""codedag: find and remove input-pipeline bottlenecks in PyTorch training.

Trace a data pipeline into an execution DAG, partition it, move the CPU-heavy preprocessing onto
the GPU, and measure what that changes. Public names are imported lazily, so ``import codedag``
stays cheap and has no side effects (no CUDA, no NVML, no patches).

* :mod:`.doctor`: The environment check behind ``codedag doctor``: plain data, rendered by the CLI
* :mod:`.errors`: The exception hierarchy
* :mod:`.version`: codedag's version (one place: the package root, the CLI and every written file
  read it here)
* :mod:`.backends`: Foundation: the op library, every library function codedag can run through
  torch
* :mod:`.calibrate`: Calibration: time each migratable call's original and backend on the target
  device
* :mod:`.cli`: The ``codedag`` command: one thin module per subcommand over the library
* :mod:`.devices`: Foundation: every hardware fact codedag reads and every hardware action it takes
* :mod:`.energy`: Energy experiments: training runs with mutated hyperparameters, their CPU and GPU
  energy, and the results store (``codedag mutate``, ``codedag results``)
* :mod:`.experiments`: The demo, the example pipelines and the scaffolding of experiments
* :mod:`.integrations`: codedag inside other training frameworks (a Lightning callback)
* :mod:`.graph`: The execution DAG model and its graph algorithms (imports nothing of codedag but
  errors)
* :mod:`.measure`: One protocol for timing A against B, and the one statistic its results are
  judged by
* :mod:`.migrate`: Stage 3: run the calls a migration plan places on a device through torch,
  transparently
* :mod:`.monitor`: Monitoring of training runs: batch time, data wait, CPU/GPU use, memory, losses,
  accuracies
* :mod:`.optimize`: Stage 2: from an execution DAG to a migration plan, as pure passes
* :mod:`.patching`: The one owner of monkeypatches: replace functions by qualified name and put the
  originals back
* :mod:`.plan`: The migration plan model shared by the optimizer (writer) and the migrator (reader)
* :mod:`.profile`: torch.profiler bottleneck scenarios and a diagnosis of what bounds a training
  step
* :mod:`.report`: Reports over measured runs: the demo's HTML page, multi-rank runs, loader tables
* :mod:`.store`: Foundation: the prefix cache's storage (LMDB tiers, entries, keyed tags, writer
  thread), used by calibration, optimization, tuning and migration
* :mod:`.trace`: Trace a data pipeline into an ExecutionDAG: capture, filter, dataflow, DataLoader
  helpers
* :mod:`.tune`: Loader tuning: measure a DataLoader's parallelism settings and choose them
  (``codedag tune``)
* :mod:`.util`: Small helpers of every layer: safe reading and atomic writing, paths, signals,
  logs, seeding
"""

from __future__ import annotations

from codedag.util.exports import lazy_exports
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
    "MigrationPlan": "codedag.plan.model",
    "MigrationError": "codedag.errors",
    "ModelsConfig": "codedag.energy.config",
    "MonitorCallback": "codedag.monitor.callbacks",
    "MoveOnly": "codedag.backends.registry",
    "Mutator": "codedag.energy.mutation",
    "OpSpec": "codedag.backends.registry",
    "OptimizeResult": "codedag.optimize.result",
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
    "RunResults": "codedag.monitor.model",
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
    "accelerate": "codedag.integrations.accelerate",
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
    "tune_loader": "codedag.tune.tuner",
}

__all__ = sorted([*_EXPORTS, "__version__"])


__getattr__ = lazy_exports(__name__, _EXPORTS, globals())


def __dir__() -> list[str]:
    return __all__

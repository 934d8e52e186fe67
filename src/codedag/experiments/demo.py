"""``codedag demo``: the whole experiment on synthetic data, end to end.

Stages: baseline training for N batches over two or more epochs with an
:class:`~codedag.monitor.ExperimentMonitor`; tracing one batch of the DataLoader; tuning the
DataLoader's settings (``codedag tune``); optimizing the DAG into a migration plan (placement
measured with the tuned loader, the prefix cache's cuts); training again with the plan applied
(its calls, its loader settings and the prefix cache, which stores each sample's deterministic
prefix in the first epoch and reads it back from the second); checking that the migrated
batches of every epoch equal the baseline's for the same seed. Each epoch's figures are kept
apart. The files go into ``settings.out_dir``: ``results.json`` and plots (from the monitor),
``dag.json``, ``dag.svg`` (or ``.dot``), ``migration_plan.json``, ``demo_summary.json`` and
``report.html``; with ``settings.sinks`` the monitor's records also go to TensorBoard or MLflow,
and the files to MLflow's artifacts.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from codedag.errors import ConfigError
from codedag.experiments import demo_cache
from codedag.experiments.demo_settings import (
    BatchedChainSummary,
    BatchedSummary,
    CacheSummary,
    DemoResult,
    DemoSettings,
    EpochSummary,
    Equivalence,
    PlanSummary,
    epoch_speedups,
)
from codedag.experiments.demo_steps import (
    Progress,
    build_loader,
    check_equivalence,
    placement_rows,
    summarize,
    train,
)
from codedag.experiments.demo_verdict import verdict
from codedag.graph.model import ExecutionDAG
from codedag.migrate.stats import BatchedStats, GuardSummary, MigrationStats
from codedag.monitor.model import RunResults
from codedag.plan import LoaderSection, MigrationPlan
from codedag.util.io import atomic_write_json
from codedag.util.paths import check_output_dir, output_lock

log = logging.getLogger(__name__)


def _no_progress(stage: str, done: int, total: int) -> None:
    """Default progress callback: nothing."""


def _prepare_out_dir(out_dir: Path) -> Path:
    check_output_dir(out_dir)  # its probe file has a name of its own: no link planted for it
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ConfigError(f"cannot write into --out {out_dir}: {e.strerror}") from e
    return out_dir


def trace_one_batch(loader: Any, settings: DemoSettings, out_dir: Path) -> Any:
    """Trace one batch of ``loader`` and write ``dag.json``; returns the DAG."""
    from codedag.trace.tracer import EnhancedTracer

    tracer = EnhancedTracer(max_depth=10, track_memory=True)
    tracer.trace_dataloader(loader)
    dag = tracer.dag_builder.dag
    dag.save(out_dir / "dag.json")
    log.info("traced one batch: %d nodes, %d edges", len(dag.nodes), len(dag.edges))
    return dag


def training_step(settings: DemoSettings, device: str) -> Any:
    """One training step of a fresh model on a batch: the consumer the loader must keep fed."""
    import torch

    from codedag.experiments.demo_data import SmallCNN

    model = SmallCNN(3 if settings.task == "image" else 1).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    criterion = torch.nn.CrossEntropyLoss()

    def step(batch: Any) -> None:
        inputs, targets = batch
        optimizer.zero_grad()
        loss = criterion(model(inputs.to(device)), targets.to(device))
        loss.backward()
        optimizer.step()
        loss.item()

    return step


def tune(loader: Any, settings: DemoSettings, device: str) -> LoaderSection | None:
    """Measure the DataLoader's settings with the training step as the consumer (short runs).

    The step runs after each batch, so workers that would take the CPU from a model training on
    the CPU are measured as such. The demo builds its own DataLoader, so the section overrides
    the settings it passes explicitly: the optimized run then uses what was measured best
    (yours when nothing beat it). Returns the plan's loader section, or None.
    """
    if not settings.tune:
        return None
    from codedag.tune import TuneOptions, tune_loader

    options = TuneOptions(
        batches=6, rounds=2, trial_s=2.0, budget_s=30.0, step_fn=training_step(settings, device)
    )
    section = tune_loader(loader, options)
    section.override = list(section.changed)
    return section


def tune_warm_epochs(
    loader: Any,
    plan: MigrationPlan,
    section: LoaderSection | None,
    settings: DemoSettings,
    device: str,
) -> LoaderSection | None:
    """The loader settings for the epochs the prefix cache serves, measured with it warm and the
    training step as the consumer, added to ``section`` and to ``plan``; ``section`` unchanged
    when nothing was tuned or nothing is cached."""
    if section is None or plan.cache is None or not plan.cache.cached_chains:
        return section
    from codedag.tune import TuneOptions, tune_warm

    options = TuneOptions(
        batches=6, rounds=2, trial_s=2.0, budget_s=30.0, step_fn=training_step(settings, device)
    )
    section.warm = tune_warm(loader, plan, options)
    section.override = sorted(set(section.override) | set(section.warm.changed))
    plan.loader = section
    return section


def optimize(
    dag: ExecutionDAG,
    settings: DemoSettings,
    device: str,
    out_dir: Path,
    loader: LoaderSection | None = None,
) -> tuple[MigrationPlan, Any]:
    """Coarsen, partition, calibrate on ``device`` and plan: calls move only where measured faster.

    Without CUDA the target is torch on the CPU, so the demo shows what codedag finds there.
    With a tuned ``loader`` section, placement is measured with its workers and threads.
    """
    from codedag.optimize.manager import OptimizerManager

    manager = OptimizerManager(
        k=settings.k,
        target_device=device,
        loader=loader,
        batched=settings.batched,
        cache="auto" if settings.cache else "off",
        cache_folder=str(out_dir / demo_cache.FOLDER),
    )
    result = manager.optimize(dag, export_dir=out_dir / "optimizer")
    return result.plan, result


def ran_batched(stats: MigrationStats) -> list[str]:
    """The sample chains the migrated run executed once per batch (none without a batch)."""
    run = stats.batched
    return list(run.chains) if isinstance(run, BatchedStats) and run.enabled and run.batches else []


def batched_summary(plan: MigrationPlan, stats: MigrationStats) -> BatchedSummary:
    """The plan's sample chains with their batched decision, and the run's batched stats."""
    section = plan.batched
    chains = [
        BatchedChainSummary(
            id=c.id,
            steps=list(c.steps),
            batched=c.batched,
            basis=c.basis,
            original_ms=None if c.original_ns is None else c.original_ns / 1e6,
            batched_ms=None if c.batched_ns is None else c.batched_ns / 1e6,
            batch_size=c.batch_size,
            backend_calls=c.backend_calls,
            reason=c.reason,
        )
        for c in section.chains
    ]
    run = stats.batched
    return BatchedSummary(
        mode=section.mode,
        device=section.device,
        chains=chains,
        stats=run if isinstance(run, BatchedStats) and run.enabled else None,
    )


def draw_dag(
    result: dict[str, Any], out_dir: Path, max_nodes: int | None = None
) -> tuple[Path, str | None, str]:
    """The coarsened DAG with partitions colored when it has at most ``max_nodes`` nodes
    (default :data:`~codedag.trace.dot.SVG_MAX_NODES`: what Graphviz draws in seconds), else its
    calls down to the deepest depth that fits
    (:func:`~codedag.report.dag_drawing.outer_calls_drawing`): ``dag.svg`` with ``dot``, else
    ``dag.dot``.

    Returns:
        The file written, the SVG text (``None`` without it) and the DOT text drawn.
    """
    from codedag.optimize.export import coarse_dot
    from codedag.report.dag_drawing import outer_calls_drawing
    from codedag.trace.dot import SVG_MAX_NODES, render_svg
    from codedag.util.io import atomic_write_bytes, atomic_write_text

    limit = SVG_MAX_NODES if max_nodes is None else max_nodes
    coarse = result["coarsened_dag"]
    if len(coarse.nodes) <= limit:
        dot_text = coarse_dot(coarse, result["optimized_partitions"])
    else:
        drawing = outer_calls_drawing(coarse, limit)
        dot_text = drawing.dot_text
        log.info(
            "the DAG drawing shows %s (%d nodes; the coarsened DAG has %d)",
            drawing.shows,
            drawing.nodes,
            len(coarse.nodes),
        )
    svg = render_svg(dot_text)
    if svg is None:
        return atomic_write_text(out_dir / "dag.dot", dot_text), None, dot_text
    return atomic_write_bytes(out_dir / "dag.svg", svg), svg.decode("utf-8"), dot_text


def run_demo(settings: DemoSettings, progress: Progress = _no_progress) -> DemoResult:
    """Run every stage and write the outputs; returns the figures of the summary.

    Raises:
        ConfigError: ``settings.out_dir`` cannot be written, or another run is writing there.
    """
    settings.validate()
    out_dir = _prepare_out_dir(Path(settings.out_dir))
    with output_lock(out_dir):
        return _run_demo(settings, progress, out_dir)


def _run_demo(settings: DemoSettings, progress: Progress, out_dir: Path) -> DemoResult:
    from codedag.devices.torch_devices import default_device, require_device
    from codedag.monitor.experiment import ExperimentMonitor

    # the migrator's default device when nothing was asked, else the one asked for if it exists
    device = default_device() if settings.device is None else require_device(settings.device)
    loader = build_loader(settings)
    monitor = ExperimentMonitor(
        f"codedag_demo_{settings.task}", save_dir=out_dir, run_dir=out_dir, sinks=settings.sinks
    )
    keep = settings.check_batches

    epochs: list[EpochSummary] = []
    kept_base = train("baseline", loader, settings, device, monitor, progress, keep, epochs)

    progress("trace", 0, 1)
    dag = trace_one_batch(loader, settings, out_dir)
    progress("trace", 1, 1)
    progress("tune", 0, 1)
    section = tune(loader, settings, device)
    progress("tune", 1, 1)
    progress("optimize", 0, 1)
    plan, result = optimize(dag, settings, device, out_dir, section)
    progress("optimize", 1, 1)
    progress("warm", 0, 1)
    section = tune_warm_epochs(loader, plan, section, settings, device)
    progress("warm", 1, 1)
    plan_json = plan.to_dict()  # final: with the warm settings
    atomic_write_json(out_dir / "migration_plan.json", plan_json)

    kept_opt, stats = _optimized_run(
        plan, section, loader, settings, device, monitor, progress, epochs, out_dir
    )
    cache = demo_cache.cache_summary(plan, stats.cache, stats.tables)

    progress("check", 0, 1)
    equivalence = check_equivalence(kept_base, kept_opt, settings.task)
    progress("check", 1, 1)

    progress("report", 0, 1)
    files = {"results": str(monitor.save_json())}
    plots = [Path(p) for p in monitor.plot_metrics(out_dir / "plots")]
    dag_path, dag_svg, dag_dot = draw_dag(result, out_dir)
    files.update(
        dag=str(out_dir / "dag.json"),
        dag_drawing=str(dag_path),
        plan=str(out_dir / "migration_plan.json"),
    )
    results = monitor.results()
    demo = _demo_result(
        settings, device, plan, section, stats, results, equivalence, files, epochs, cache
    )
    from codedag.report.chain_view import chain_view
    from codedag.report.demo_report import write_demo_report

    files["report"] = str(
        write_demo_report(
            out_dir / "report.html",
            demo,
            plan_json,
            dag_svg,
            dag_dot,
            plots,
            results.environment,
            stats.cache.model_dump(mode="json"),
            chain_view(dag, plan_json),
            stats.tables.model_dump(mode="json"),
        )
    )
    files["summary"] = str(atomic_write_json(out_dir / "demo_summary.json", demo.to_dict()))
    for name in ("plan", "report", "summary", "dag_drawing"):
        monitor.log_artifact(files[name])
    monitor.close()
    progress("report", 1, 1)
    return demo


def _optimized_run(
    plan: MigrationPlan,
    section: LoaderSection | None,
    loader: Any,
    settings: DemoSettings,
    device: str,
    monitor: Any,
    progress: Progress,
    epochs: list[EpochSummary],
    out_dir: Path,
) -> tuple[Any, MigrationStats]:
    """The optimized mode: the plan applied (with the tuned loader, if any) around the same
    training; the batches kept for the check and the migrator's statistics."""
    from codedag.migrate.api import PipelineMigrator

    keep = settings.check_batches
    demo_cache.clear(out_dir)  # the first epoch computes and stores, as a first run does
    migrator = PipelineMigrator.from_plan(
        plan, default_device=device, cache=demo_cache.cache_settings(out_dir, settings.cache)
    )
    try:
        with migrator:
            opt_loader = build_loader(settings) if section is not None else loader
            kept_opt = train(
                "optimization", opt_loader, settings, device, monitor, progress, keep, epochs
            )
        stats = migrator.get_stats()
    finally:
        demo_cache.clear(out_dir)  # nothing stays in shared memory
    return kept_opt, stats


def _demo_result(
    settings: DemoSettings,
    device: str,
    plan: MigrationPlan,
    section: LoaderSection | None,
    stats: MigrationStats,
    results: RunResults,
    equivalence: Equivalence,
    files: dict[str, str],
    epochs: list[EpochSummary],
    cache: CacheSummary | None,
) -> DemoResult:
    """What the demo found: modes, speedup with its spread, placement, verdict and files."""
    functions = stats.functions
    modes, optimized = summarize(results)
    speedup = None if optimized is None else optimized["speedup"]
    spread = None if optimized is None else optimized["speedup_spread"]
    difference = None if optimized is None else optimized["difference"]
    rows = placement_rows(plan)
    guard = stats.guard
    demo = DemoResult(
        settings=settings,
        device=device,
        modes=modes,
        speedup=speedup,
        migrated_calls={n: int(f.get("migrated", 0)) for n, f in functions.items()},
        fallbacks={n: int(f.get("fell_back", 0)) for n, f in functions.items()},
        fallback_reasons={n: dict(f.get("fallback_reasons", {})) for n, f in functions.items()},
        equivalence=equivalence,
        plan_summary=PlanSummary(
            contexts_to_migrate=len(plan.context_device_map),
            functions=plan.migrated_functions,
            notes=list(plan.notes),
        ),
        placement=rows,
        verdict=verdict(
            rows,
            speedup,
            device,
            plan.placement.basis,
            None if section is None or section.keeps_yours else section.chosen.label(),
            switched_off=guard.switched_off if isinstance(guard, GuardSummary) else {},
            batched=ran_batched(stats),
            cached=demo_cache.cache_clause(cache),
            epochs=epoch_speedups(epochs),
            difference=difference,
            spread=spread,
        ),
        guard=guard,
        files=files,
        loader=section,
        batched=batched_summary(plan, stats),
        epochs=epochs,
        cache=cache,
        speedup_spread=spread,
        difference=difference,
    )
    return demo

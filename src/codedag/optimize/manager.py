"""OptimizerManager: coarsen, partition, refine and plan, in three stages."""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, get_args

from codedag.errors import ConfigError
from codedag.optimize.assemble import assemble
from codedag.optimize.batched import check_mode
from codedag.optimize.coarse import CoarsenedDAG
from codedag.optimize.coarsen import GraphCoarsening
from codedag.optimize.costs import CanMigrate, CostModel
from codedag.optimize.measurements import PlanMeasurements
from codedag.optimize.partition import KWayPartitioner, Partition, as_coarse
from codedag.optimize.placement import PlacementSettings, blocked_reason
from codedag.optimize.plan_builder import (
    _default_blocker,
    accelerators,
    build_plan,
    loader_workers,
    placement_device,
)
from codedag.optimize.refine import IterativeOptimizer
from codedag.optimize.result import OptimizeResult
from codedag.plan import CacheSection, MigrationPlan
from codedag.plan.cache import MAX_BUDGET_BYTES, FirstEpoch

if TYPE_CHECKING:
    from codedag.calibrate.measurement import Calibration

log = logging.getLogger(__name__)


class OptimizerManager:
    """Run the optimization passes on an execution DAG and turn the result into a migration plan.

    The manager holds its settings only: each :meth:`optimize` measures its own DAG into a
    :class:`~codedag.optimize.measurements.PlanMeasurements` (returned on the result) and plans
    from it, so one manager plans any number of DAGs as fresh ones would.

    Args:
        k: number of partitions.
        coarsen_max_depth: call levels a repeated subgraph grows below its anchor.
        max_iterations: most refinement moves evaluated.
        alpha, beta, gamma, lambda_weight: objective and assignment weights (see
            :class:`KWayPartitioner` and :class:`IterativeOptimizer`).
        no_improvement_threshold: refinement stops after this many rejected moves in a row.
        max_cut_increase: how much one refinement move may raise the edge cut (0: never).
        cost: cost model of weights, savings and transfers.
        can_migrate: ``canonical_name -> bool``; default: the migration registry, else a
            conservative built-in list.
        gpu_count: accelerators for the plan that :meth:`optimize` writes (default 0).
        target_device: force the accelerator device (``"cpu"`` plans torch-on-CPU migration).
        placement: margin, ``only``/``exclude`` and an optional what-if speedup.
        calibrate: measure candidate calls on the placement device before planning (default);
            without measurements (and without an assumed speedup) nothing is placed.
        calibration: measurements already taken (``codedag.calibrate.Calibration``).
        calibration_options: passed to :class:`codedag.calibrate.Calibrator` (``cache``, ...).
        progress: ``progress(done, total, what)`` during calibration.
        loader: DataLoader settings chosen by ``codedag tune`` (a plan's ``loader`` section,
            :class:`~codedag.plan.LoaderSection` or its dict): placement is then measured with
            its worker count and threads instead of the traced loader's, and the plan carries it.
        batched: ``auto`` (default: a sample chain runs once per batch where calibration
            measures it faster), ``always`` or ``never``; overrides ``placement.batched``.
        cache: the prefix cache: ``auto`` (cut each sample's deterministic prefix where the
            store's measured costs say it saves time, :mod:`codedag.optimize.cache`) or
            ``off`` (default: the plan has no ``cache`` section).
        cache_budget_bytes: the memory the cached values may take (default: the RAM tier's
            default budget on this machine).
        cache_folder: the prefix cache's folder, recorded in the plan (default: the user cache).
        first_epoch: how the first epoch stores the cache's values: ``all`` (default: every
            value in the epoch that computes it), ``auto`` (paced where storing every value
            would slow it) or ``paced``
            (:func:`codedag.optimize.cache.pace_first_epoch`).
        tables: element-wise runs on uint8 arrays through lookup tables: ``auto`` (the plan
            names where they start, :mod:`codedag.optimize.tables`) or ``off``; default: as
            ``cache``.
    """

    def __init__(
        self,
        k: int = 2,
        coarsen_max_depth: int = 5,
        max_iterations: int = 50,
        *,
        alpha: float = 1.0,
        beta: float = 0.5,
        gamma: float = 10.0,
        lambda_weight: float = 0.5,
        no_improvement_threshold: int = 10,
        max_cut_increase: int = 0,
        cost: CostModel | None = None,
        can_migrate: CanMigrate | None = None,
        gpu_count: int = 0,
        target_device: str | None = None,
        placement: PlacementSettings | None = None,
        calibrate: bool = True,
        calibration: Any | None = None,
        calibration_options: dict[str, Any] | None = None,
        progress: Any | None = None,
        loader: Any | None = None,
        batched: str | None = None,
        cache: str = "off",
        cache_budget_bytes: int | None = None,
        cache_folder: str | None = None,
        tables: str | None = None,
        first_epoch: FirstEpoch = "all",
    ) -> None:
        if not isinstance(k, int) or isinstance(k, bool) or k < 1:
            raise ConfigError(f"k must be an integer >= 1, got {k!r}")
        self.k = k
        self.cost = cost or CostModel()
        self.can_migrate = can_migrate
        self.gpu_count = gpu_count
        self.target_device = target_device
        self.placement = placement or PlacementSettings()
        if batched is not None:
            self.placement = dataclasses.replace(self.placement, batched=batched)
        check_mode(self.placement.batched)
        if cache not in ("auto", "off"):
            raise ConfigError(f"cache must be 'auto' or 'off', got {cache!r}")
        if cache_budget_bytes is not None and not 0 <= cache_budget_bytes <= MAX_BUDGET_BYTES:
            raise ConfigError(
                f"cache_budget_bytes must be >= 0 and <= {MAX_BUDGET_BYTES} (1 PiB), got "
                f"{cache_budget_bytes}"
            )
        if first_epoch not in get_args(FirstEpoch):
            raise ConfigError(f"first_epoch must be 'auto', 'all' or 'paced', got {first_epoch!r}")
        if tables not in (None, "auto", "off"):
            raise ConfigError(f"tables must be 'auto' or 'off', got {tables!r}")
        self.cache = cache
        self.tables = cache if tables is None else tables
        self.cache_budget_bytes = cache_budget_bytes
        self.cache_folder = cache_folder
        self.first_epoch = first_epoch
        self.calibrate = calibrate
        self.calibration = calibration
        self.calibration_options = dict(calibration_options or {})
        self.progress = progress
        self.loader = _loader_section(loader)
        self.coarsening = GraphCoarsening(max_depth=coarsen_max_depth)
        self.partitioner = KWayPartitioner(
            k=k,
            alpha=alpha,
            beta=beta,
            gamma=gamma,
            lambda_weight=lambda_weight,
            cost=self.cost,
        )
        self.refiner = IterativeOptimizer(
            max_iterations=max_iterations,
            alpha=alpha,
            beta=beta,
            no_improvement_threshold=no_improvement_threshold,
            max_cut_increase=max_cut_increase,
            cost=self.cost,
        )

    def optimize(
        self, dag: Any, export_dir: str | os.PathLike[str] | None = None
    ) -> OptimizeResult:
        """Coarsen, partition and refine ``dag``; write the stage files when ``export_dir`` is given.

        Returns:
            The passes' outputs (:class:`~codedag.optimize.result.OptimizeResult`, also readable
            as a dict: ``result['migration_plan']``, ``result['statistics']``).
        """
        if not hasattr(dag, "nodes") or not hasattr(dag, "edges"):
            raise ConfigError(f"expected an ExecutionDAG, got {type(dag).__name__}")
        coarse = dag if isinstance(dag, CoarsenedDAG) else self.coarsening.coarsen(dag)
        kway = self.partitioner.partition(coarse)
        refined = self.refiner.optimize(kway, coarse)
        measurements = self.measure(coarse)
        notes = []
        if self.partitioner.stats.get("k", self.k) < self.k and len(coarse):
            notes.append(
                f"k={self.k} is larger than the {len(coarse)} nodes of the coarsened DAG; "
                f"used k={self.partitioner.stats['k']}"
            )
        if not len(coarse):
            notes.append("the DAG is empty: nothing to place")
        if measurements.problem:
            notes.append(measurements.problem)
        plan = self.plan(refined, coarse, measurements, notes=notes)
        refine_stats = self.refiner.stats
        statistics = {
            "coarsening": dict(coarse.stats),
            "partitioning": dict(self.partitioner.stats),
            "edge_cut": {
                "kway": self.partitioner.stats.get("edge_cut", 0),
                "optimized": refine_stats.get("edge_cut_after", 0),
            },
            "iteration": dict(refine_stats),
        }
        result = OptimizeResult(
            coarsened_dag=coarse,
            kway_partitions=kway,
            optimized_partitions=refined,
            plan=plan,
            statistics=statistics,
            measurements=measurements,
        )
        if export_dir is not None:
            from codedag.optimize.export import write_results  # files only when asked

            write_results(Path(export_dir), result)
        return result

    def measure(self, dag: Any) -> PlanMeasurements:
        """Measure what a plan of ``dag`` is made from: its candidate calls on the placement
        device, its sample chains batched against per sample (``auto``), and the prefix cache's
        store for its values' sizes (``cache='auto'``). A calibration given to the manager is
        used as it is; nothing measured here is kept on the manager."""
        from codedag.calibrate.timing import summarized_disturbances

        coarse = as_coarse(dag)
        with summarized_disturbances():  # one warning for the calls and the chains
            calibration, problem = self._calibrate_calls(coarse)
            chains = self._calibrate_chains(coarse, calibration)
        store = self._measure_store(coarse) if self.cache == "auto" else None
        return PlanMeasurements(calibration, chains, store, problem)

    def _calibrate_calls(self, coarse: CoarsenedDAG) -> tuple[Any | None, str | None]:
        """The candidate calls measured on the placement device, and why not where wanted.

        The calibration is ``None`` when there is no target device, when an assumed speedup
        replaces measurements, or when calibration is switched off. Functions the placement
        would refuse anyway (blocked, excluded, not named with ``only``) are not measured.
        """
        if self.calibration is not None:
            return self.calibration, None
        if not self.calibrate or self.placement.assume_speedup is not None:
            return None, None
        workers = self._workers(coarse)
        device = placement_device(accelerators(self.gpu_count, self.target_device), workers)
        if device is None:
            return None, None
        from codedag.devices.torch_devices import device_exists

        if not device_exists(device):
            problem = (
                f"{device} does not exist here, so nothing could be measured on it: plan on the "
                "machine that has it, or pass an assumed speedup for a what-if plan"
            )
            log.warning("%s", problem)
            return None, problem
        from codedag.calibrate import calibrate_dag

        blocker = _default_blocker()
        settings = self.placement

        def wanted(name: str) -> bool:
            return blocked_reason(name, None, (), settings, blocker) is None

        log.info("calibrating candidate calls on %s", device)
        options = dict(self.calibration_options)
        if self.progress is not None:
            options["progress"] = self.progress
        if workers > 0:
            options.setdefault("threads", self._worker_threads())
        return calibrate_dag(coarse.source, device, names=wanted, **options), None

    def get_migration_plan(
        self,
        partitions: list[Partition],
        dag: Any,
        gpu_count: int | None = None,
        target_device: str | None = None,
        measurements: PlanMeasurements | None = None,
    ) -> dict[str, Any]:
        """The migration plan dict (``MigrationPlan.to_dict()``) for partitions of ``dag``, made
        from ``measurements`` (default: :meth:`measure` ``dag`` now)."""
        coarse = as_coarse(dag)
        if measurements is None:
            measurements = self.measure(coarse)
        return self.plan(partitions, coarse, measurements, gpu_count, target_device).to_dict()

    def plan(
        self,
        partitions: list[Partition],
        dag: Any,
        measurements: PlanMeasurements,
        gpu_count: int | None = None,
        target_device: str | None = None,
        *,
        notes: Sequence[str] = (),
    ) -> MigrationPlan:
        """The migration plan for partitions of ``dag``, made from ``measurements``: each pass
        gives its section and :func:`~codedag.optimize.assemble.assemble` joins them (``notes``
        are appended)."""
        from codedag.optimize.batched import batched_section, traced_batch_size

        coarse = as_coarse(dag)
        workers = self._workers(coarse)
        placement = build_plan(
            partitions,
            coarse,
            self.gpu_count if gpu_count is None else gpu_count,
            target_device if target_device is not None else self.target_device,
            cost=self.cost,
            can_migrate=self.can_migrate,
            calibration=measurements.calibration,
            settings=self.placement,
            workers=workers,
        )
        found = self.find_chains(coarse)
        batched = batched_section(
            found,
            measurements.chains,
            self.placement.batched,
            self._batched_device(),
            self.placement.margin_pct,
            workers,
            traced_batch_size(coarse.source, found.samples),
        )
        tables = None
        if self.tables == "auto":
            from codedag.optimize.tables import find_runs

            tables = find_runs(coarse.source)
        return assemble(
            placement,
            batched,
            batched_note=found.note,
            cache=self.plan_cache(coarse, measurements) if self.cache == "auto" else None,
            tables=tables,
            loader=self.loader,
            notes=notes,
        )

    # ------------------------------------------------------------------ batched chains
    def _batched_device(self) -> str | None:
        """Where batched chains run: the main process's device (the target, even with workers)."""
        accels = accelerators(self.gpu_count, self.target_device)
        return accels[0] if accels else None

    def find_chains(self, dag: Any) -> Any:
        """The sample chains of ``dag`` batched execution could defer (placement's rules apply:
        random draws, output buffers, ``only``/``exclude``)."""
        from codedag.optimize.chains import find_chains
        from codedag.optimize.plan_builder import _default_positional

        blocker = _default_blocker()
        positional = _default_positional()
        settings = self.placement

        def allowed(node: Any) -> bool:
            reason = blocked_reason(node.name, node.args, positional(node.name), settings, blocker)
            return reason is None

        return find_chains(as_coarse(dag).source, allowed=allowed)

    def _calibrate_chains(self, dag: Any, calibration: Any | None = None) -> dict[str, Any]:
        """Each sample chain of ``dag`` measured batched vs per sample on the batched device
        (``auto`` only: ``always``/``never`` decide without measuring); on the CPU, not those
        its calls' ``calibration`` rules out (:func:`~codedag.calibrate.chains.
        slower_per_call`)."""
        if self.placement.batched != "auto" or not self.calibrate:
            return {}
        device = self._batched_device()
        if device is None:
            return {}
        from codedag.devices.torch_devices import device_exists

        if not device_exists(device):
            return {}
        from codedag.calibrate.chains import ChainCalibrator
        from codedag.optimize.batched import traced_batch_size

        found = self.find_chains(dag)
        if not found.candidates:
            return {}
        cache = self.calibration_options.get("cache")
        calibrator = ChainCalibrator(device, cache=cache)
        source = as_coarse(dag).source
        batch_size = traced_batch_size(source, found.samples)
        out = {}
        for i, candidate in enumerate(found.candidates):
            if self.progress is not None:
                self.progress(i, len(found.candidates), f"batched {candidate.id}")
            ruled_out = _ruled_out_on_cpu(candidate, calibration, source, device)
            if ruled_out is not None:
                out[candidate.id] = calibrator.unmeasured(candidate, batch_size, ruled_out)
                continue
            log.info("calibrating batched %s (%s)", candidate.id, ", ".join(candidate.steps))
            out[candidate.id] = calibrator.measure(candidate, batch_size)
        return out

    # ------------------------------------------------------------------ prefix cache
    def _measure_store(self, dag: Any) -> Any | None:
        """The prefix cache store's costs for the sizes of the values ``dag`` could cache."""
        from codedag.optimize.cache import candidates, find_prefixes

        found = find_prefixes(as_coarse(dag).source)
        sizes = {c.nbytes for chain in found.chains for c in candidates(chain)}
        if not self.calibrate or not sizes:
            return None
        from codedag.calibrate.store_costs import measure_store

        if self.progress is not None:
            self.progress(0, 1, "prefix cache store")
        log.info("measuring the prefix cache's store for %d value sizes", len(sizes))
        return measure_store(sizes)

    def plan_cache(self, dag: Any, measurements: PlanMeasurements) -> CacheSection:
        """The plan's ``cache`` section: each chain's deterministic prefix and its cut, from the
        traced times and the store's measured costs (:mod:`codedag.optimize.cache`)."""
        from codedag.optimize.cache import decide, find_prefixes

        found = find_prefixes(as_coarse(dag).source)
        budget = self.cache_budget_bytes
        if budget is None:
            from codedag.store.tiers import default_ram_budget_bytes

            budget = default_ram_budget_bytes()
        section = decide(found, measurements.store, budget, self.cache, self.first_epoch)
        section.folder = self.cache_folder
        return section

    # ------------------------------------------------------------------ tuned loader
    def _workers(self, coarse: CoarsenedDAG) -> int:
        """DataLoader workers the placed calls will run in: the tuned loader's, else the traced."""
        if self.loader is not None:
            return self.loader.chosen.num_workers
        return loader_workers(coarse)

    def _worker_threads(self) -> int:
        """Torch threads in a worker: the tuned count, else PyTorch's default of one."""
        threads = self.loader.chosen.threads if self.loader is not None else None
        return threads or 1


def _loader_section(loader: Any | None) -> Any | None:
    """A plan's loader section (or a whole plan holding one) as the plan model, or None."""
    if loader is None:
        return None
    from codedag.plan import LoaderSection, MigrationPlan

    if isinstance(loader, LoaderSection):
        return loader
    if isinstance(loader, MigrationPlan):
        return loader.loader
    if isinstance(loader, dict) and "context_device_map" in loader:
        return MigrationPlan.from_dict(loader, "loader plan").loader
    try:
        return LoaderSection.model_validate(loader)
    except ValueError as e:
        raise ConfigError(f"loader settings: {e}") from None


def _ruled_out_on_cpu(
    candidate: Any, calibration: Calibration | None, dag: Any, device: str
) -> str | None:
    """Why a chain is not measured batched on the CPU (its calls' calibration rules it out), or
    None."""
    if calibration is None or not device.startswith("cpu"):
        return None
    import torch

    from codedag.calibrate.chains import slower_per_call

    def traced_ns(call_id: int) -> int:
        return int(getattr(dag.nodes.get(call_id), "total_ns", 0) or 0)

    return slower_per_call(candidate, calibration, traced_ns, torch.get_num_threads())

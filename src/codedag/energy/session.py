"""A session: run the planned experiments, measure each one's energy, record everything.

Per experiment: a folder, the training command in its own process group with its output in
``training.log``, CPU and GPU energy over exactly the run's window, success judged by the exit code
and the configured patterns, retries after a pause, and the record written (experiment.json,
summary.csv, database) as soon as it finished. Ctrl-C ends the running process groups, keeps every
finished experiment, and returns a result with status ``interrupted``.

The experiments run through an executor: on this machine (:class:`LocalExecutor`, one per free GPU
slot) or on a Ray cluster (:class:`codedag.energy.ray_executor.RayExecutor`). Either way this
process alone writes the session folder and the database.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from codedag.devices.governor import CPU_ROOT, check_governor, governor_applied, governor_status
from codedag.devices.gpus import EmptyGPUs, GPUs
from codedag.energy.config import ModelsConfig
from codedag.energy.executors import Executor, LocalExecutor, Slot, Task
from codedag.energy.jobs import Job, RunSpec
from codedag.energy.meters import CpuEnergyMeter
from codedag.energy.meters import cpu_meter_factory as default_cpu_meter_factory
from codedag.energy.process import REGISTRY
from codedag.energy.runner import (
    MemoryCooldown,
    Place,
    extract_metrics,
    gpu_record,
    is_bundled,
    judge,
    run_experiment,
)
from codedag.energy.settings import BatchSettings
from codedag.energy.store import SessionStore

__all__ = ["EnergySession", "SessionOptions", "SessionResult", "extract_metrics", "judge"]

log = logging.getLogger(__name__)


@dataclass
class SessionOptions:
    """How to run a session (the CLI's flags)."""

    results_dir: Path = Path("results")
    cooldown_s: float = 60.0
    timeout_s: float | None = None
    retry_pause_s: float = 5.0
    gpu_interval_s: float = 0.1
    echo: TextIO | None = field(default_factory=lambda: sys.stdout)
    cpu_root: Path = CPU_ROOT
    seed: int = 0
    kill_grace_s: float = 5.0
    on_record: Callable[[dict[str, Any]], None] | None = None


@dataclass
class SessionResult:
    """What a session produced."""

    path: Path
    records: list[dict[str, Any]]
    status: str  # "completed" or "interrupted"
    governor: str


class EnergySession:
    """Runs jobs with an executor and records them in a session folder.

    Args:
        config: the models config.
        settings: the batch settings (governor, retries, name).
        options: runtime options.
        gpus: GPU interface of this machine (EmptyGPUs on machines without NVML).
        cpu_meter_factory: makes one CPU meter per window here (default: the probed source).
        executor: where jobs run (default: :class:`LocalExecutor` over ``gpus``).
    """

    def __init__(
        self,
        config: ModelsConfig,
        settings: BatchSettings,
        options: SessionOptions,
        gpus: GPUs | None = None,
        cpu_meter_factory: Callable[[], CpuEnergyMeter] | None = None,
        executor: Executor | None = None,
    ) -> None:
        self.config, self.settings, self.options = config, settings, options
        self.gpus = gpus if gpus is not None else EmptyGPUs("no GPU interface given")
        self.executor = executor or LocalExecutor(self.gpus)
        self._given_meter_factory = cpu_meter_factory
        self._cpu_meter_factory: Callable[[], CpuEnergyMeter] | None = None
        self._cooldown = MemoryCooldown()
        self.store: SessionStore | None = None
        self.governor = "unknown"
        self._lock = threading.Lock()
        self._total = 0
        self._started = 0

    def run(self, jobs: Sequence[Job]) -> SessionResult:
        """Run ``jobs``; returns the records of every finished experiment.

        Raises:
            ConfigError: a governor this machine does not offer, or an executor that cannot
                start (Ray missing); nothing is written then.
            ExperimentError: the executor cannot reach where the jobs run (a Ray cluster).
        """
        if self.executor.runs_here:
            check_governor(self.settings.governor, governor_status(self.options.cpu_root))
        self.executor.open()  # before the session folder: a cluster that is not there writes none
        try:
            return self._run(jobs)
        finally:
            self.executor.close()

    def _run(self, jobs: Sequence[Job]) -> SessionResult:
        self.store = SessionStore(self.options.results_dir)
        self._total = len(jobs)
        stop = threading.Event()
        status = "interrupted"
        info: dict[str, Any] = {
            "experiment_name": self.settings.experiment_name,
            "started": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "seed": self.options.seed,
            "settings": self.settings.model_dump(),
            "planned_experiments": len(jobs),
            "slots": [s.label for s in self.executor.slots()],
            "executor": self.executor.describe(),
            "status": "running",
        }
        self.store.save_session_info(info)
        log.info("session %s: %d experiment(s)", self.store.path, len(jobs))
        try:
            with self._governor() as governor:
                self.governor = governor
                info["governor"] = governor
                self.executor.run(jobs, self, stop)
            status = "completed"
        except KeyboardInterrupt:
            stop.set()
            log.warning("interrupted: ending running experiments, keeping finished ones")
        except BaseException:
            status = "failed"
            raise
        finally:
            stop.set()
            REGISTRY.terminate_all(self.options.kill_grace_s)
            info.update(
                status=status,
                finished=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
                finished_experiments=len(self.store.records),
            )
            self.store.save_session_info(info)
        return SessionResult(self.store.path, list(self.store.records), status, self.governor)

    @contextlib.contextmanager
    def _governor(self) -> Iterator[str]:
        """The governor applied here around the session; remote nodes record their own."""
        if not self.executor.runs_here:
            yield f"per node (wanted: {self.settings.governor or 'unchanged'})"
            return
        with governor_applied(self.settings.governor, self.options.cpu_root) as governor:
            yield governor

    # ------------------------------------------------------------ Work, for executors
    def spec(self, job: Job) -> RunSpec:
        """What an executor needs to run ``job`` anywhere."""
        return RunSpec(
            job=job,
            config=self.config,
            max_retries=self.settings.max_retries,
            timeout_s=self.options.timeout_s,
            retry_pause_s=self.options.retry_pause_s,
            cooldown_s=self.options.cooldown_s,
            gpu_interval_s=self.options.gpu_interval_s,
            kill_grace_s=self.options.kill_grace_s,
            bundled_config=is_bundled(self.config),
        )

    def start(self, job: Job) -> Task:
        """Number the next experiment and give it its folder in the session."""
        assert self.store is not None
        with self._lock:
            self._started += 1
            number = self._started
        experiment_id, folder = self.store.new_experiment_dir(job.repo, job.model)
        return Task(number, self._total, experiment_id, folder, self.spec(job))

    def run_here(self, task: Task, slot: Slot, stop: threading.Event) -> dict[str, Any] | None:
        """Run an experiment in this process, on ``slot`` of this machine."""
        job = task.spec.job
        defaults = self.config.defaults(job.repo, job.model)
        changed = {k: v for k, v in job.hyperparameters.items() if v != defaults.get(k)}
        log.info(
            "[%d/%d] %s on %s %s",
            task.number,
            task.total,
            task.experiment_id,
            slot.label,
            changed or "defaults",
        )
        place = Place(
            slot=slot,
            gpus=self.gpus,
            cpu_meter_factory=self._local_cpu_meters(),
            cooldown=self._cooldown,
            governor=self.governor,
            echo=self.options.echo,
            gpu=gpu_record(self.gpus, slot),
        )
        return run_experiment(task.spec, task.folder, place, stop)

    def _local_cpu_meters(self) -> Callable[[], CpuEnergyMeter]:
        with self._lock:
            if self._cpu_meter_factory is None:
                if len(self.executor.slots()) > 1:
                    reason = (
                        "experiments run concurrently on several GPUs; CPU energy counters "
                        "cover the whole package, so no per-experiment CPU energy"
                    )
                    self._cpu_meter_factory = lambda: CpuEnergyMeter(reason)
                else:
                    self._cpu_meter_factory = (
                        self._given_meter_factory or default_cpu_meter_factory()
                    )
            return self._cpu_meter_factory

    def finish(self, task: Task, result: dict[str, Any]) -> None:
        """Record a finished experiment: experiment.json, summary.csv, database."""
        assert self.store is not None
        job = task.spec.job
        record = {
            "experiment_id": task.experiment_id,
            "repository": job.repo,
            "model": job.model,
            "mode": job.mode,
            "description": job.description,
            "hyperparameters": job.hyperparameters,
            "mutated_hyperparameters": job.mutated,
            "node_failures": [],
            **result,
        }
        self.store.add(record)
        if self.options.on_record is not None:
            self.options.on_record(record)
        mark = "ok" if record["training_success"] else f"FAILED: {record['error_message']}"
        log.info("%s %s (%.1f s)", task.experiment_id, mark, record["duration_seconds"])

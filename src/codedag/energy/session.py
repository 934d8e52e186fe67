"""A session: run the planned experiments, measure each one's energy, record everything.

Per experiment: a folder, the training command in its own process group with its output in
``training.log``, CPU and GPU energy over exactly the run's window, success judged by the exit code
and the configured patterns, retries after a pause, and the record written (experiment.json,
summary.csv, database) before the next experiment starts. Ctrl-C ends the running process group,
keeps every finished experiment, and returns a result with status ``interrupted``.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

from codedag.energy.background import BackgroundLoad
from codedag.energy.config import ModelsConfig
from codedag.energy.executors import Executor, LocalExecutor, Slot
from codedag.energy.governor import CPU_ROOT, check_governor, governor_applied, governor_status
from codedag.energy.gpu_meter import GpuEnergyMeter
from codedag.energy.meters import CpuEnergyMeter, CpuEnergyReading
from codedag.energy.meters import cpu_meter_factory as default_cpu_meter_factory
from codedag.energy.plan import Job
from codedag.energy.process import REGISTRY, CommandResult, run_command
from codedag.energy.settings import BatchSettings
from codedag.energy.store import SessionStore
from codedag.errors import ExperimentError
from codedag.monitor.devices.gpus import EmptyGPUs, GPUs
from codedag.util.io import atomic_write_json, atomic_write_text

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


def judge(
    result: CommandResult, text: str, success_patterns: Sequence[str], error_patterns: Sequence[str]
) -> str | None:
    """Why an attempt failed, or None when it succeeded (exit code 0, patterns satisfied)."""
    if result.timed_out:
        return f"timed out after {result.duration_s:.1f} s"
    if result.exit_code is None:
        return "interrupted"
    if result.exit_code != 0:
        return f"exit code {result.exit_code}"
    for pattern in error_patterns:
        match = re.search(pattern, text, re.MULTILINE)
        if match:
            return f"log matches error pattern {pattern!r}: {match.group(0)!r}"
    if success_patterns and not any(re.search(p, text, re.MULTILINE) for p in success_patterns):
        return f"no success pattern matched ({list(success_patterns)})"
    return None


def extract_metrics(text: str, patterns: dict[str, str]) -> dict[str, float]:
    """The last number each pattern's first group captures in the log."""
    metrics: dict[str, float] = {}
    for name, pattern in patterns.items():
        matches = re.findall(pattern, text, re.MULTILINE)
        if matches:
            last = matches[-1]
            try:
                metrics[name] = float(last[0] if isinstance(last, tuple) else last)
            except ValueError:
                log.warning("metric %s: %r is not a number", name, last)
    return metrics


class EnergySession:
    """Runs jobs with an executor and records them in a session folder.

    Args:
        config: the models config.
        settings: the batch settings (governor, retries, name).
        options: runtime options.
        gpus: GPU interface (EmptyGPUs on machines without NVML).
        cpu_meter_factory: makes one CPU meter per window (default: the probed source).
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
        if cpu_meter_factory is None:
            cpu_meter_factory = default_cpu_meter_factory()
        concurrent = len(self.executor.slots()) > 1
        self._cpu_meter_factory = (
            (
                lambda: CpuEnergyMeter(
                    "experiments run concurrently on several GPUs; CPU energy counters cover the "
                    "whole package, so no per-experiment CPU energy"
                )
            )
            if concurrent
            else cpu_meter_factory
        )
        self.store: SessionStore | None = None
        self.governor = "unknown"
        self._started_slots: set[Slot] = set()
        self._lock = threading.Lock()
        self._total = 0
        self._done = 0

    def run(self, jobs: Sequence[Job]) -> SessionResult:
        """Run ``jobs``; returns the records of every finished experiment."""
        check_governor(self.settings.governor, governor_status(self.options.cpu_root))
        self.store = SessionStore(self.options.results_dir)
        self._total = len(jobs)
        stop = threading.Event()
        status = "interrupted"
        started = time.strftime("%Y-%m-%dT%H:%M:%S%z")
        info: dict[str, Any] = {
            "experiment_name": self.settings.experiment_name,
            "started": started,
            "seed": self.options.seed,
            "settings": self.settings.model_dump(),
            "planned_experiments": len(jobs),
            "slots": [s.label for s in self.executor.slots()],
            "status": "running",
        }
        self.store.save_session_info(info)
        log.info("session %s: %d experiment(s)", self.store.path, len(jobs))
        try:
            with governor_applied(self.settings.governor, self.options.cpu_root) as governor:
                self.governor = governor
                info["governor"] = governor
                self.executor.run(jobs, self._run_job, stop)
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

    def _run_job(self, job: Job, slot: Slot, stop: threading.Event) -> None:
        assert self.store is not None
        with self._lock:
            cool = slot in self._started_slots and self.options.cooldown_s > 0
            self._started_slots.add(slot)
            self._done += 1
            number = self._done
        if cool:
            log.info("cooling down %.0f s", self.options.cooldown_s)
            if stop.wait(self.options.cooldown_s):
                return
        repo = self.config.repo(job.repo)
        experiment_id, folder = self.store.new_experiment_dir(job.repo, job.model)
        argv = self.config.command(job.repo, job.model, job.hyperparameters)
        env = {**os.environ, **repo.env, **slot.env(), "PYTHONUNBUFFERED": "1"}
        timeout_s = (
            self.options.timeout_s or job.timeout_s or self.config.timeout_s(job.repo, job.model)
        )
        defaults = self.config.defaults(job.repo, job.model)
        changed = {k: v for k, v in job.hyperparameters.items() if v != defaults.get(k)}
        log.info(
            "[%d/%d] %s on %s %s",
            number,
            self._total,
            experiment_id,
            slot.label,
            changed or "defaults",
        )
        log_path = folder / "training.log"
        attempts: list[dict[str, Any]] = []
        for attempt in range(self.settings.max_retries + 1):
            if attempt:
                log.warning(
                    "%s failed (%s); retry %d/%d in %.0f s",
                    experiment_id,
                    attempts[-1]["error"],
                    attempt,
                    self.settings.max_retries,
                    self.options.retry_pause_s,
                )
                if stop.wait(self.options.retry_pause_s):
                    return
            outcome = self._attempt(job, slot, argv, env, timeout_s, log_path, folder, stop)
            outcome["attempt"] = attempt + 1
            attempts.append(outcome)
            if stop.is_set() and outcome["error"] == "interrupted":
                return  # interrupted: not a finished experiment
            if outcome["error"] is None:
                break
        last = attempts[-1]
        result: CommandResult = last["result"]
        record = {
            "experiment_id": experiment_id,
            "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(result.start_unix_s)),
            "repository": job.repo,
            "model": job.model,
            "mode": job.mode,
            "description": job.description,
            "hyperparameters": job.hyperparameters,
            "mutated_hyperparameters": job.mutated,
            "command": argv,
            "slot": slot.label,
            "cuda_visible_devices": slot.env().get("CUDA_VISIBLE_DEVICES"),
            "governor": self.governor,
            "training_success": last["error"] is None,
            "duration_seconds": round(result.duration_s, 3),
            "retries": len(attempts) - 1,
            "exit_code": result.exit_code,
            "timed_out": result.timed_out,
            "error_message": last["error"],
            "attempts": [
                {
                    "attempt": a["attempt"],
                    "exit_code": a["result"].exit_code,
                    "timed_out": a["result"].timed_out,
                    "duration_seconds": round(a["result"].duration_s, 3),
                    "error": a["error"],
                    "energy_metrics": a["energy"],
                }
                for a in attempts
            ],
            "performance_metrics": extract_metrics(
                last["text"], repo.performance_metrics.log_patterns
            ),
            "energy_metrics": last["energy"],
            "background": last["background"],
        }
        self.store.add(record)
        if self.options.on_record is not None:
            self.options.on_record(record)
        mark = "ok" if record["training_success"] else f"FAILED: {record['error_message']}"
        log.info("%s %s (%.1f s)", experiment_id, mark, result.duration_s)

    def _attempt(
        self,
        job: Job,
        slot: Slot,
        argv: list[str],
        env: dict[str, str],
        timeout_s: float | None,
        log_path: Path,
        folder: Path,
        stop: threading.Event,
    ) -> dict[str, Any]:
        repo = self.config.repo(job.repo)
        offset = log_path.stat().st_size if log_path.exists() else 0
        with open(log_path, "a", encoding="utf-8") as handle:
            handle.write(f"# codedag: {shlex.join(argv)}\n")
        background = None
        if job.background is not None:
            bg = job.background
            values = {**self.config.defaults(bg.repo, bg.model), **bg.hyperparameters}
            background = BackgroundLoad(
                self.config.command(bg.repo, bg.model, values), folder / "background.log", env
            )
        indices = [] if slot.gpu_index is None else [slot.gpu_index]
        gpu_meter = GpuEnergyMeter(self.gpus, indices, self.options.gpu_interval_s)
        cpu_meter = self._cpu_meter_factory()
        try:
            if background is not None:
                background.start()
            cpu_meter.start()
            gpu_meter.start()
            start_error = None
            try:
                result = run_command(
                    argv,
                    log_path,
                    cwd=self.config.repo_dir(job.repo),
                    env=env,
                    timeout_s=timeout_s,
                    echo=self.options.echo,
                    stop=stop,
                    grace_s=self.options.kill_grace_s,
                )
            except ExperimentError as error:  # the program could not be started
                start_error = str(error)
                now = time.time()
                result = CommandResult(argv, None, 0.0, False, now, now)
            finally:
                gpu_reading = gpu_meter.stop()
                cpu_reading = cpu_meter.stop()
        finally:
            if background is not None:
                background.stop()
        with open(log_path, encoding="utf-8", errors="replace") as handle:
            handle.seek(offset)
            text = handle.read()
        error = start_error or judge(result, text, repo.success_patterns, repo.error_patterns)
        energy = {
            **cpu_reading.metrics(),
            **gpu_reading.metrics(),
            "window_start_unix_s": result.start_unix_s,
            "window_end_unix_s": result.end_unix_s,
        }
        self._write_raw(folder / "energy", cpu_reading, gpu_reading, result)
        return {
            "result": result,
            "error": error,
            "text": text,
            "energy": energy,
            "background": background.info() if background is not None else None,
        }

    @staticmethod
    def _write_raw(
        energy_dir: Path, cpu: CpuEnergyReading, gpu: Any, result: CommandResult
    ) -> None:
        lines = [
            f"window_start_unix_s: {result.start_unix_s:.6f}",
            f"window_end_unix_s: {result.end_unix_s:.6f}",
            f"duration_s: {result.duration_s:.6f}",
            f"source: {cpu.source}",
        ]
        if cpu.reason:
            lines.append(f"unavailable: {cpu.reason}")
        for name in ("pkg_j", "ram_j", "total_j"):
            value = getattr(cpu, name)
            lines.append(f"{name}: {'' if value is None else f'{value:.6f}'}")
        lines += [f"raw {k}: {v:.6f} J" for k, v in cpu.raw.items()]
        atomic_write_text(energy_dir / "cpu_energy.txt", "\n".join(lines) + "\n")
        atomic_write_json(
            energy_dir / "cpu_energy.json",
            {
                "source": cpu.source,
                "pkg_joules": cpu.pkg_j,
                "ram_joules": cpu.ram_j,
                "total_joules": cpu.total_j,
                "unavailable_reason": cpu.reason,
                "raw_joules": cpu.raw,
            },
        )
        gpu.write_raw(energy_dir)

"""One experiment where it runs: cooldown, attempts with retries, energy, the raw files.

This is the part of a session that runs on the machine that trains: this process for the local
executor, a Ray worker on some node for the Ray executor. It gets a picklable :class:`RunSpec`
(what to run and how) and a :class:`Place` (which slot, GPU interface, CPU meter, cooldown clock
and process registry to use there), writes ``training.log`` and ``energy/`` into a folder, and
returns the experiment's measured part as a plain dict. The session adds the identity
(experiment id, session) and records it.
"""

from __future__ import annotations

import logging
import os
import re
import shlex
import socket
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TextIO

from codedag.devices.gpus import GPUs
from codedag.energy.background import BackgroundLoad
from codedag.energy.config import ModelsConfig, bundled_path
from codedag.energy.executors import Slot
from codedag.energy.gpu_meter import GpuEnergyMeter, GpuEnergyReading
from codedag.energy.jobs import RunSpec
from codedag.energy.meters import CpuEnergyMeter, CpuEnergyReading
from codedag.energy.process import REGISTRY, CommandResult, ProcessRegistry, run_command
from codedag.errors import ExperimentError
from codedag.util.io import atomic_write_json, atomic_write_text, open_no_follow

log = logging.getLogger(__name__)


def is_bundled(config: ModelsConfig) -> bool:
    """Whether ``config`` was loaded from codedag's bundled models config."""
    return config.base_dir.resolve() == bundled_path(".").resolve()


class Cooldown(Protocol):
    """Keeps ``cooldown_s`` between the end of one experiment and the start of the next."""

    def wait(self, key: str, cooldown_s: float, stop: threading.Event) -> bool:
        """Sleep what is left of the cooldown of ``key``; False when ``stop`` was set."""
        ...

    def mark(self, key: str) -> None:
        """Record that an experiment on ``key`` ended now."""
        ...


def sleep_left(left_s: float, stop: threading.Event) -> bool:
    """Sleep what is left of a cooldown (nothing when ``left_s`` is not positive); False when
    ``stop`` was set."""
    if left_s > 0:
        log.info("cooling down %.0f s", left_s)
        return not stop.wait(left_s)
    return not stop.is_set()


class MemoryCooldown:
    """Cooldown clock of one process (the local executor's slots)."""

    def __init__(self) -> None:
        self._ended: dict[str, float] = {}
        self._lock = threading.Lock()

    def wait(self, key: str, cooldown_s: float, stop: threading.Event) -> bool:
        with self._lock:
            ended = self._ended.get(key)
        if ended is None or cooldown_s <= 0:
            return not stop.is_set()
        return sleep_left(cooldown_s - (time.monotonic() - ended), stop)

    def mark(self, key: str) -> None:
        with self._lock:
            self._ended[key] = time.monotonic()


@dataclass
class Place:
    """Where an experiment runs and what measures it there."""

    slot: Slot
    gpus: GPUs
    cpu_meter_factory: Callable[[], CpuEnergyMeter]
    cooldown: Cooldown
    governor: str
    registry: ProcessRegistry = REGISTRY
    echo: TextIO | None = None
    node: dict[str, Any] = field(default_factory=lambda: local_node())
    gpu: dict[str, Any] | None = None
    executor: str = "local"
    cooldown_key: str | None = None


def local_node() -> dict[str, Any]:
    """This machine as recorded with every experiment."""
    return {"hostname": socket.gethostname(), "ip": None, "ray_node_id": None}


def gpu_record(gpus: GPUs, slot: Slot) -> dict[str, Any] | None:
    """Name and UUID of the slot's GPU (None on a CPU slot)."""
    if slot.gpu_index is None:
        return None
    infos = {i.index: i for i in gpus.info()}
    info = infos.get(slot.gpu_index)
    return {
        "index": slot.gpu_index,
        "name": info.name if info else None,
        "uuid": info.uuid if info else slot.gpu_uuid,
    }


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


def unmeasured_energy(reason: str) -> dict[str, Any]:
    """``energy_metrics`` of an experiment that never ran (every quantity None, with why)."""
    return {
        **CpuEnergyReading("unavailable", reason=reason).metrics(),
        **GpuEnergyReading([], reason=reason).metrics(),
        "window_start_unix_s": None,
        "window_end_unix_s": None,
    }


def failed_result(
    spec: RunSpec, error: str, executor: str, node: dict[str, Any] | None = None
) -> dict[str, Any]:
    """The measured part of an experiment that could not run at all (same keys as a run)."""
    job = spec.job
    return {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S"),
        "command": spec.config.command(job.repo, job.model, job.hyperparameters),
        "executor": executor,
        "node": node or {"hostname": None, "ip": None, "ray_node_id": None},
        "slot": None,
        "gpu": None,
        "cuda_visible_devices": None,
        "governor": "unknown",
        "training_success": False,
        "duration_seconds": 0.0,
        "retries": 0,
        "exit_code": None,
        "timed_out": False,
        "error_message": error,
        "attempts": [],
        "performance_metrics": {},
        "energy_metrics": unmeasured_energy(error),
        "background": None,
    }


def run_experiment(
    spec: RunSpec, folder: Path, place: Place, stop: threading.Event
) -> dict[str, Any] | None:
    """Run one experiment in ``folder`` (``training.log``, ``energy/``) at ``place``.

    Returns:
        The measured part of the record, or None when ``stop`` interrupted it (an interrupted
        experiment is not a finished one).
    """
    job = spec.job
    config = spec.models_config()
    repo = config.repo(job.repo)
    key = place.cooldown_key or place.slot.label
    if not place.cooldown.wait(key, spec.cooldown_s, stop):
        return None
    argv = config.command(job.repo, job.model, job.hyperparameters)
    env = {**os.environ, **repo.env, **place.slot.env(), "PYTHONUNBUFFERED": "1"}
    timeout_s = spec.timeout_s or job.timeout_s or config.timeout_s(job.repo, job.model)
    (folder / "energy").mkdir(parents=True, exist_ok=True)
    log_path = folder / "training.log"
    attempts: list[dict[str, Any]] = []
    try:
        for attempt in range(spec.max_retries + 1):
            if attempt:
                log.warning(
                    "%s failed (%s); retry %d/%d in %.0f s",
                    folder.name,
                    attempts[-1]["error"],
                    attempt,
                    spec.max_retries,
                    spec.retry_pause_s,
                )
                if stop.wait(spec.retry_pause_s):
                    return None
            outcome = _attempt(spec, config, place, argv, env, timeout_s, log_path, folder, stop)
            outcome["attempt"] = attempt + 1
            attempts.append(outcome)
            if stop.is_set() and outcome["error"] == "interrupted":
                return None
            if outcome["error"] is None:
                break
    finally:
        if attempts:
            place.cooldown.mark(key)
    last = attempts[-1]
    result: CommandResult = last["result"]
    return {
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(result.start_unix_s)),
        "command": argv,
        "executor": place.executor,
        "node": place.node,
        "slot": place.slot.label,
        "gpu": place.gpu,
        "cuda_visible_devices": env.get("CUDA_VISIBLE_DEVICES"),
        "governor": place.governor,
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
        "performance_metrics": extract_metrics(last["text"], repo.performance_metrics.log_patterns),
        "energy_metrics": last["energy"],
        "background": last["background"],
    }


def _attempt(
    spec: RunSpec,
    config: ModelsConfig,
    place: Place,
    argv: list[str],
    env: dict[str, str],
    timeout_s: float | None,
    log_path: Path,
    folder: Path,
    stop: threading.Event,
) -> dict[str, Any]:
    job = spec.job
    repo = config.repo(job.repo)
    offset = log_path.stat().st_size if log_path.exists() else 0
    fd = open_no_follow(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND)  # never via a link
    with os.fdopen(fd, "a", encoding="utf-8") as handle:
        handle.write(f"# codedag: {shlex.join(argv)}\n")
    background = None
    if job.background is not None:
        bg = job.background
        values = {**config.defaults(bg.repo, bg.model), **bg.hyperparameters}
        background = BackgroundLoad(
            config.command(bg.repo, bg.model, values),
            folder / "background.log",
            env,
            registry=place.registry,
        )
    indices = [] if place.slot.gpu_index is None else [place.slot.gpu_index]
    gpu_meter = GpuEnergyMeter(place.gpus, indices, spec.gpu_interval_s)
    cpu_meter = place.cpu_meter_factory()
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
                cwd=config.repo_dir(job.repo),
                env=env,
                timeout_s=timeout_s,
                echo=place.echo,
                stop=stop,
                registry=place.registry,
                grace_s=spec.kill_grace_s,
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
    failure = start_error or judge(result, text, repo.success_patterns, repo.error_patterns)
    energy = {
        **cpu_reading.metrics(),
        **gpu_reading.metrics(),
        "window_start_unix_s": result.start_unix_s,
        "window_end_unix_s": result.end_unix_s,
    }
    write_raw_energy(folder / "energy", cpu_reading, gpu_reading, result)
    return {
        "result": result,
        "error": failure,
        "text": text,
        "energy": energy,
        "background": background.info() if background is not None else None,
    }


def write_raw_energy(
    energy_dir: Path, cpu: CpuEnergyReading, gpu: GpuEnergyReading, result: CommandResult
) -> None:
    """``cpu_energy.txt``/``.json`` and the GPU sample files of one window."""
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

"""The Ray task of one experiment: what runs on the node Ray picked.

:func:`run_on_node` is a generator task. It first yields where it runs (host, IP, Ray node id, the
GPU Ray assigned), then runs the experiment with the same runner as the local executor
(:func:`codedag.energy.runner.run_experiment`) in a temporary folder, measuring energy on this
node: NVML's counter for the assigned GPU, RAPL or perf for the CPU. It then yields the measured
record and the folder's files (``training.log``, ``energy/``), which the session writes into its
own folder. A watchdog (:mod:`codedag.energy.ray_reaper`) ends the training processes if the
worker itself dies.

Node-local state lives in ``<tmp>/codedag-energy/``: the time the last experiment ended per GPU
(cooldown) and the energy windows of running experiments. CPU energy counters cover the whole
package, so a CPU reading whose window overlapped another experiment's on this node is recorded as
unavailable, with that reason, rather than attributed to one of them.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import os
import socket
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from codedag.devices.governor import UNAVAILABLE_NO_CPUFREQ, governor_status
from codedag.devices.gpus import open_gpus
from codedag.energy.executors import Slot, Task
from codedag.energy.meters import CpuEnergyMeter, CpuEnergyReading, cpu_meter_factory
from codedag.energy.ray_reaper import GroupReaper
from codedag.energy.runner import Place, gpu_record, run_experiment, sleep_left
from codedag.errors import WriteError
from codedag.util.io import atomic_write_text
from codedag.util.signals import pid_exists

log = logging.getLogger(__name__)

STATE_DIR = Path(tempfile.gettempdir()) / "codedag-energy"
STALE_S = 24 * 3600.0
OVERLAP_REASON = (
    "another experiment ran on this node during this window; CPU energy counters cover the whole "
    "package, so no per-experiment CPU energy"
)


class FileCooldown:
    """Cooldown clock shared by every experiment on this node (one stamp file per key)."""

    def __init__(self, root: Path = STATE_DIR) -> None:
        self.root = root

    def _stamp(self, key: str) -> Path:
        return self.root / f"cooldown-{key.replace('/', '_')}.stamp"

    def wait(self, key: str, cooldown_s: float, stop: threading.Event) -> bool:
        try:
            ended = float(self._stamp(key).read_text())
        except (OSError, ValueError):
            return not stop.is_set()
        return sleep_left(min(cooldown_s, cooldown_s - (time.time() - ended)), stop)

    def mark(self, key: str) -> None:
        try:  # the folder is shared by the node's users: never written through a link
            atomic_write_text(self._stamp(key), repr(time.time()))
        except WriteError as error:  # the cooldown is advice: the experiment's result stands
            log.warning("cooldown not recorded: %s", error)


class EnergyWindows:
    """The energy windows of experiments on this node, to tell whether two overlapped."""

    def __init__(self, root: Path = STATE_DIR / "windows") -> None:
        self.root = root

    def begin(self) -> str:
        """Open a window now; returns its id."""
        self.root.mkdir(parents=True, exist_ok=True)
        window = uuid.uuid4().hex
        self._write(window, {"pid": os.getpid(), "start": time.time(), "end": None})
        return window

    def end(self, window: str) -> bool:
        """Close ``window``; whether any other window on this node overlapped it."""
        mine = self._read(self.root / f"{window}.json") or {"start": time.time()}
        mine["end"] = time.time()
        self._write(window, mine)
        overlapped = False
        for path in self.root.glob("*.json"):
            if path.stem == window:
                continue
            other = self._read(path)
            if other is None:
                continue
            other_end = other.get("end")
            if other_end is None:  # still running, or its process died without closing it
                alive = pid_exists(int(other.get("pid", -1)))
                other_end = time.time() if alive else path.stat().st_mtime
            if other_end < time.time() - STALE_S:
                with contextlib.suppress(OSError):
                    path.unlink()
                continue
            if other["start"] < mine["end"] and other_end > mine["start"]:
                overlapped = True
        return overlapped

    def _write(self, window: str, data: dict[str, Any]) -> None:
        atomic_write_text(self.root / f"{window}.json", json.dumps(data))

    @staticmethod
    def _read(path: Path) -> dict[str, Any] | None:
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and "start" in data else None


class NodeCpuMeter(CpuEnergyMeter):
    """A CPU meter of this node that refuses a reading shared with another experiment."""

    def __init__(self, inner: CpuEnergyMeter, windows: EnergyWindows) -> None:
        super().__init__(inner.reason)
        self.source = inner.source
        self.inner = inner
        self.windows = windows
        self._window: str | None = None

    def start(self) -> None:
        self._window = self.windows.begin()
        self.inner.start()

    def stop(self) -> CpuEnergyReading:
        reading = self.inner.stop()
        overlapped = self._window is not None and self.windows.end(self._window)
        if overlapped and reading.reason is None:
            return CpuEnergyReading("unavailable", reason=OVERLAP_REASON, raw=reading.raw)
        return reading


@functools.lru_cache(maxsize=1)
def _probed_cpu_meters() -> Callable[[], CpuEnergyMeter]:
    """Probe this node's CPU energy source once per worker process."""
    return cpu_meter_factory()


def node_info() -> dict[str, Any]:
    """Where this task runs: host name, IP and Ray node id."""
    import ray

    context = ray.get_runtime_context()
    return {
        "hostname": socket.gethostname(),
        "ip": ray.util.get_node_ip_address(),
        "ray_node_id": context.get_node_id(),
    }


def node_governor() -> str:
    """The CPU governor in effect on this node (the session does not change a node's)."""
    try:
        status = governor_status()
    except OSError as error:
        return f"unavailable: {error}"
    return status.in_effect if status.current else UNAVAILABLE_NO_CPUFREQ


def read_files(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` by relative POSIX path."""
    return {
        path.relative_to(folder).as_posix(): path.read_bytes()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


def run_on_node(task: Task, echo: bool) -> Iterator[dict[str, Any]]:
    """The Ray task body: yields ``{"event": "started", ...}``, then ``{"event": "done", ...}``."""
    import ray

    gpu_ids = [str(i) for i in ray.get_gpu_ids()]
    node = node_info()
    with open_gpus() as gpus:
        # Ray made only the assigned GPU visible to this worker (CUDA_VISIBLE_DEVICES).
        infos = gpus.info() if gpu_ids else []
        slot = Slot(0, infos[0].uuid) if infos else Slot()
        gpu = gpu_record(gpus, slot)
        if gpu is not None:
            gpu["ray_gpu_id"] = gpu_ids[0]
        yield {"event": "started", "node": node, "gpu": gpu, "pid": os.getpid()}
        windows = EnergyWindows()
        inner = _probed_cpu_meters()
        spec = task.spec
        with (
            tempfile.TemporaryDirectory(prefix="codedag-experiment-") as tmp,
            GroupReaper(spec.kill_grace_s) as reaper,
        ):
            folder = Path(tmp) / task.experiment_id
            place = Place(
                slot=slot,
                gpus=gpus,
                cpu_meter_factory=lambda: NodeCpuMeter(inner(), windows),
                cooldown=FileCooldown(),
                governor=node_governor(),
                registry=reaper,
                echo=sys.stdout if echo else None,
                node=node,
                gpu=gpu,
                executor="ray",
                cooldown_key=(gpu or {}).get("uuid") or "cpu",
            )
            result = run_experiment(spec, folder, place, threading.Event())
            files = read_files(folder) if folder.exists() else {}
    yield {"event": "done", "result": result, "files": files}

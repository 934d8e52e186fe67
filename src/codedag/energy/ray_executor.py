"""Mutation experiments on a Ray cluster: one Ray task per experiment.

Each experiment is a Ray task that asks for one GPU (none on a cluster without GPUs, where it
asks for ``cpus_per_experiment`` CPUs instead) and runs :func:`codedag.energy.ray_node.run_on_node`
on the node Ray picks: the same runner, timeout, retries and cooldown as the local executor,
energy measured on that node. The session process stays the only writer: every finished task's
record and files come back here and are written into the one session folder and the database at
once (summary.csv is rewritten after each).

A task lost with its worker or node (``WorkerCrashedError``, ``NodeDiedError``, lost objects) is
submitted again, up to ``node_retries`` times, and the loss is recorded in the experiment's
``node_failures``. Ctrl-C or SIGTERM cancels every task: running ones get KeyboardInterrupt (the
runner ends their process groups), those still running after the grace period are force-killed
(the node's watchdog ends their processes), queued ones never start.

Needs the optional extra ``codedag[ray]``. Every node needs codedag installed with the same
models config paths (see docs/clusters.md).
"""

from __future__ import annotations

import contextlib
import logging
import signal
import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from codedag.energy.executors import Executor, Slot, Task, Work
from codedag.energy.runner import failed_result
from codedag.errors import ConfigError, ExperimentError
from codedag.util.io import atomic_write_bytes

log = logging.getLogger(__name__)

WAIT_S = 0.5


@dataclass
class _Running:
    """One submitted task: the experiment, where it runs, the losses so far."""

    task: Task
    node: dict[str, Any] | None = None
    gpu: dict[str, Any] | None = None
    failures: list[dict[str, Any]] = field(default_factory=list)


def _remove_if_empty(folder: Path) -> None:
    """Remove an experiment folder that never received a file (its task never ran)."""
    if folder.is_dir() and not any(p.is_file() for p in folder.rglob("*")):
        for path in sorted(folder.rglob("*"), reverse=True):
            path.rmdir()
        folder.rmdir()


def check_reachable(address: str, timeout_s: float = 5.0) -> None:
    """Fail fast on a ``HOST:PORT`` (or ``ray://HOST:PORT``) nobody listens on.

    ``ray.init`` retries an unreachable address for minutes; a TCP connection tells at once.

    Raises:
        ExperimentError: the port cannot be connected to.
    """
    target = address.removeprefix("ray://")
    host, sep, port = target.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return  # "auto", "local", or a form Ray resolves itself
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except OSError as error:
        reason = error.strerror or type(error).__name__
        raise ExperimentError(
            f"cannot reach the Ray cluster at {address} ({reason}); start it with "
            "`ray start --head` on its head node, or check --address"
        ) from error


def _ray() -> Any:
    try:
        import ray
    except ImportError as error:
        raise ConfigError(
            "the ray executor needs Ray on this machine and on every node: "
            "pip install 'codedag[ray]'"
        ) from error
    return ray


class RayExecutor(Executor):
    """Runs experiments as Ray tasks on the cluster at ``address``.

    Args:
        address: the cluster (``auto``, ``HOST:PORT``, ``ray://HOST:10001``); None follows
            ``ray.init()``: ``RAY_ADDRESS`` when set, else a new Ray instance on this machine.
        node_retries: how often an experiment lost with its worker or node is submitted again.
        cpus_per_experiment: CPUs each task asks for on a cluster without GPUs.
        gpus_per_experiment: GPUs each task asks for; None: 1 when the cluster has GPUs, else 0.
        echo: forward the training output of every node to this terminal.
        wanted_governor: the CPU governor the settings ask for; nodes keep their own, and a node
            whose governor differs is reported (set it when starting the node).
        cancel_grace_s: after Ctrl-C, seconds a running task has to end its processes before
            it is force-killed.
    """

    kind = "ray"
    runs_here = False

    def __init__(
        self,
        address: str | None = None,
        node_retries: int = 3,
        cpus_per_experiment: float = 1.0,
        gpus_per_experiment: float | None = None,
        echo: bool = True,
        wanted_governor: str | None = None,
        cancel_grace_s: float = 15.0,
    ) -> None:
        if node_retries < 0:
            raise ConfigError(f"node_retries must be >= 0, got {node_retries}")
        if cpus_per_experiment <= 0:
            raise ConfigError(f"cpus_per_experiment must be > 0, got {cpus_per_experiment}")
        self.address = address
        self.node_retries = node_retries
        self.cpus_per_experiment = cpus_per_experiment
        self.gpus_per_experiment = gpus_per_experiment
        self.echo = echo
        self.wanted_governor = wanted_governor
        self.cancel_grace_s = cancel_grace_s
        self._connected = False
        self._remote: Any = None
        self._described: dict[str, Any] = {"kind": self.kind, "address": address}
        self._governor_warned: set[str] = set()

    def slots(self) -> list[Slot]:
        return []  # Ray places the tasks; nothing runs on this machine's slots

    def describe(self) -> dict[str, Any]:
        return dict(self._described)

    # -------------------------------------------------------------------- connection
    def open(self) -> None:
        ray = _ray()
        main = threading.current_thread() is threading.main_thread()
        previous = signal.getsignal(signal.SIGTERM) if main else None
        kwargs: dict[str, Any] = {"log_to_driver": self.echo, "logging_level": logging.WARNING}
        if self.address is None:
            kwargs["include_dashboard"] = False
        else:
            check_reachable(self.address)
        try:
            ray.init(address=self.address, **kwargs)
        except (ConnectionError, RuntimeError, ValueError) as error:
            where = self.address or "RAY_ADDRESS or a new local instance"
            raise ExperimentError(
                f"cannot connect to the Ray cluster ({where}): {error}"
            ) from error
        finally:
            if main and previous is not None:
                # ray.init turns SIGTERM into sys.exit; the session ends its tasks on SIGTERM
                signal.signal(signal.SIGTERM, previous)
        self._connected = True
        try:
            self._prepare(ray)
        except BaseException:
            self.close()
            raise

    def _prepare(self, ray: Any) -> None:
        """Size each task from the cluster's resources and describe the cluster."""
        resources = ray.cluster_resources()
        gpus = self.gpus_per_experiment
        if gpus is None:
            gpus = 1.0 if resources.get("GPU", 0) >= 1 else 0.0
        cpus = 1.0 if gpus else self.cpus_per_experiment
        largest = max((n.get("Resources", {}).get("CPU", 0) for n in ray.nodes() if n.get("Alive")),
                      default=0)  # fmt: skip
        if largest < cpus:
            raise ConfigError(
                f"each experiment asks for {cpus:g} CPU(s) but no node of the Ray cluster has "
                f"that many (the largest has {largest:g}); lower --cpus-per-experiment"
            )
        from codedag.energy.ray_node import run_on_node

        self._remote = ray.remote(run_on_node).options(
            num_cpus=cpus, num_gpus=gpus, max_retries=0, retry_exceptions=False
        )
        nodes = [
            {
                "ip": n.get("NodeManagerAddress"),
                "hostname": n.get("NodeManagerHostname"),
                "ray_node_id": n.get("NodeID"),
                "cpus": n.get("Resources", {}).get("CPU", 0),
                "gpus": n.get("Resources", {}).get("GPU", 0),
            }
            for n in ray.nodes()
            if n.get("Alive")
        ]
        self._described = {
            "kind": self.kind,
            "address": self.address,
            "ray_version": ray.__version__,
            "gpus_per_experiment": gpus,
            "cpus_per_experiment": cpus,
            "node_retries": self.node_retries,
            "nodes": nodes,
        }
        log.info(
            "Ray cluster: %d node(s), %g CPU(s), %g GPU(s); each experiment asks for %s",
            len(nodes),
            resources.get("CPU", 0),
            resources.get("GPU", 0),
            f"{gpus:g} GPU" if gpus else f"{cpus:g} CPU(s)",
        )

    def close(self) -> None:
        if self._connected:
            self._connected = False
            _ray().shutdown()

    # -------------------------------------------------------------------------- run
    def run(self, jobs: Sequence[Any], work: Work, stop: threading.Event) -> None:
        if self._remote is None:
            self.open()
        ray = _ray()
        running: dict[Any, _Running] = {}
        try:
            for job in jobs:
                task = work.start(job)
                running[self._submit(task)] = _Running(task)
            while running and not stop.is_set():
                ready, _ = ray.wait(list(running), num_returns=1, timeout=WAIT_S)
                for handle in ready:
                    self._step(handle, running, work)
        except KeyboardInterrupt:
            stop.set()
            self._cancel(running, work)
            raise
        except BaseException:  # recording failed: end every task, record nothing more
            stop.set()
            self._cancel(running, None)
            raise
        if running:  # stop was set from elsewhere
            self._cancel(running, work)

    def _submit(self, task: Task) -> Any:
        return self._remote.remote(task, self.echo)

    def _step(self, handle: Any, running: dict[Any, _Running], work: Work) -> None:
        """Take the next message of one task: started, done, or its loss."""
        ray = _ray()
        entry = running[handle]
        task = entry.task
        try:
            message = ray.get(next(handle))
        except StopIteration:
            del running[handle]
            work.finish(task, self._failed(entry, "the Ray task ended without a result"))
            return
        except ray.exceptions.TaskCancelledError:
            del running[handle]
            return
        except ray.exceptions.RayTaskError as error:  # codedag's code raised on the node
            del running[handle]
            text = str(error).strip().splitlines()[-1]
            work.finish(task, self._failed(entry, f"the Ray task failed: {text}"))
            return
        except ray.exceptions.RayError as error:  # the worker or its node was lost
            del running[handle]
            self._lost(entry, error, running, work)
            return
        if message["event"] == "started":
            entry.node, entry.gpu = message["node"], message["gpu"]
            where = message["node"]["hostname"] or message["node"]["ip"]
            gpu = message["gpu"]
            log.info(
                "[%d/%d] %s on %s (%s)%s",
                task.number,
                task.total,
                task.experiment_id,
                where,
                message["node"]["ip"],
                f" {gpu['name']} {gpu['uuid']}" if gpu else "",
            )
            return
        del running[handle]
        self._write_files(task, message["files"])
        result = message["result"]
        if result is None:  # interrupted on the node
            return
        result["node_failures"] = entry.failures
        self._check_governor(result)
        work.finish(task, result)

    def _lost(
        self, entry: _Running, error: Exception, running: dict[Any, _Running], work: Work
    ) -> None:
        task = entry.task
        text = str(error).strip().splitlines()[0] if str(error).strip() else ""
        failure = {
            "error": f"{type(error).__name__}: {text}"[:500],
            "node": entry.node,
            "gpu": entry.gpu,
            "time": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        entry.failures.append(failure)
        if len(entry.failures) <= self.node_retries:
            log.warning(
                "%s: lost with its worker or node on %s (%s); submitting it again (%d/%d)",
                task.experiment_id,
                (entry.node or {}).get("hostname") or "an unknown node",
                type(error).__name__,
                len(entry.failures),
                self.node_retries,
            )
            retry = _Running(task, failures=entry.failures)
            running[self._submit(task)] = retry
            return
        log.error("%s: lost %d time(s); giving up", task.experiment_id, len(entry.failures))
        work.finish(task, self._failed(entry, f"lost {len(entry.failures)} time(s): {text}"))

    def _failed(self, entry: _Running, error: str) -> dict[str, Any]:
        result = failed_result(entry.task.spec, error, self.kind, entry.node)
        result["node_failures"] = entry.failures
        result["gpu"] = entry.gpu
        return result

    @staticmethod
    def _write_files(task: Task, files: dict[str, bytes]) -> None:
        for name, data in files.items():
            relative = PurePosixPath(name)
            if relative.is_absolute() or ".." in relative.parts:
                log.warning("%s: ignoring file %r from the node", task.experiment_id, name)
                continue
            atomic_write_bytes(task.folder.joinpath(*relative.parts), data)

    def _check_governor(self, result: dict[str, Any]) -> None:
        wanted = self.wanted_governor
        node = (result.get("node") or {}).get("hostname") or "?"
        if wanted and result.get("governor") != wanted and node not in self._governor_warned:
            self._governor_warned.add(node)
            log.warning(
                "node %s runs the %r CPU governor, not %r: set it on the node "
                "(the governor in effect is recorded with every experiment)",
                node,
                result.get("governor"),
                wanted,
            )

    # ------------------------------------------------------------------- cancelling
    def _cancel(self, running: dict[Any, _Running], work: Work | None) -> None:
        """Cancel every task; force-kill those still running after the grace period.

        An experiment that finishes while being cancelled is still recorded through ``work``
        (None: dropped).
        """
        if not running:
            return
        ray = _ray()
        unfinished = [entry.task for entry in running.values()]
        log.warning("cancelling %d Ray task(s)", len(running))
        for handle in running:
            with contextlib.suppress(Exception):
                ray.cancel(handle)
        deadline = time.monotonic() + self.cancel_grace_s
        try:
            while running and time.monotonic() < deadline:
                ready, _ = ray.wait(list(running), num_returns=1, timeout=WAIT_S)
                for handle in ready:
                    self._drain(handle, running, work)
        except KeyboardInterrupt:
            log.warning("interrupted again: force-killing the remaining tasks")
        for handle in list(running):
            with contextlib.suppress(Exception):
                ray.cancel(handle, force=True)
        deadline = time.monotonic() + 10.0
        while running and time.monotonic() < deadline:
            ready, _ = ray.wait(list(running), num_returns=1, timeout=WAIT_S)
            for handle in ready:
                self._drain(handle, running, work)
        for entry in running.values():
            log.error("%s: the Ray task did not end after cancelling", entry.task.experiment_id)
        running.clear()
        for task in unfinished:
            _remove_if_empty(task.folder)

    def _drain(self, handle: Any, running: dict[Any, _Running], work: Work | None) -> None:
        """After a cancel: keep an experiment that finished anyway, drop everything else."""
        ray = _ray()
        try:
            message = ray.get(next(handle))
        except (StopIteration, ray.exceptions.RayError):
            running.pop(handle, None)
            return
        if message["event"] == "done":
            entry = running.pop(handle)
            if message["result"] is not None and work is not None:
                self._write_files(entry.task, message["files"])
                message["result"]["node_failures"] = entry.failures
                work.finish(entry.task, message["result"])

"""Where experiments run: the executor interface and the local executor.

A session hands an executor its planned jobs and a :class:`Work`: ``start(job)`` numbers the
experiment on the session's side, ``run_here(task, slot, stop)`` runs it in this process, and
``finish(task, result)`` records it, always in the session's process (one writer of the session
folder and the database). The local executor calls all three here; the Ray executor
(:mod:`codedag.energy.ray_executor`) runs the middle part on the cluster instead.

The local executor gives each free GPU one slot (the experiment sees only that GPU through
``CUDA_VISIBLE_DEVICES``) and runs one experiment per slot at a time, so no two energy windows
overlap on a GPU. A machine without a free GPU has one CPU slot: experiments run one at a time.
"""

from __future__ import annotations

import logging
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from codedag.devices.gpus import GPUs
from codedag.energy.jobs import RunSpec

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Slot:
    """A place to run one experiment: a GPU (position in the GPU list, UUID) or the CPU."""

    gpu_index: int | None = None
    gpu_uuid: str | None = None

    @property
    def label(self) -> str:
        return "cpu" if self.gpu_index is None else f"gpu{self.gpu_index}"

    def env(self) -> dict[str, str]:
        """Environment that pins the experiment to this slot's GPU (hides GPUs on a CPU slot)."""
        if self.gpu_index is None:
            return {}
        return {"CUDA_VISIBLE_DEVICES": self.gpu_uuid or str(self.gpu_index)}


@dataclass(frozen=True)
class Task:
    """One numbered experiment handed to an executor (plain data: it travels to Ray nodes)."""

    number: int
    total: int
    experiment_id: str
    folder: Path
    spec: RunSpec


class Work(Protocol):
    """The session's side of running jobs."""

    def start(self, job: Any) -> Task:
        """Number the job's experiment and give it a folder (session side)."""
        ...

    def run_here(self, task: Task, slot: Slot, stop: threading.Event) -> dict[str, Any] | None:
        """Run the experiment in this process; None when ``stop`` interrupted it."""
        ...

    def finish(self, task: Task, result: dict[str, Any]) -> None:
        """Record a finished experiment (session side)."""
        ...


class Executor(ABC):
    """Runs a session's jobs; concrete executors say where."""

    kind = "local"
    runs_here = True  # experiments run on this machine: the session's governor applies

    @abstractmethod
    def slots(self) -> list[Slot]:
        """The slots of this machine jobs run on (their count is the local concurrency)."""

    def describe(self) -> dict[str, Any]:
        """What session.json records about the executor."""
        return {"kind": self.kind, "slots": [s.label for s in self.slots()]}

    def open(self) -> None:  # noqa: B027 - nothing to connect to by default
        """Connect to whatever runs the jobs (called by the session before :meth:`run`)."""

    def close(self) -> None:  # noqa: B027 - nothing to release by default
        """Release it (always called, also after errors and Ctrl-C)."""

    @abstractmethod
    def run(self, jobs: Sequence[Any], work: Work, stop: threading.Event) -> None:
        """Run every job unless ``stop`` is set; re-raise KeyboardInterrupt after setting it."""


class LocalExecutor(Executor):
    """One slot per free GPU of this machine, else one CPU slot.

    Args:
        gpus: the GPU interface; a GPU is free when its used memory is at most ``free_memory_mb``.
        max_slots: use at most this many GPUs (None: all free ones).
        free_memory_mb: memory a GPU may already use and still count as free.
    """

    def __init__(self, gpus: GPUs, max_slots: int | None = None, free_memory_mb: float = 1024.0):
        infos = {i.index: i for i in gpus.info()}
        slots = []
        for sample in gpus.sample():
            used = sample.memory_used_mb
            if used is not None and used > free_memory_mb:
                log.info("GPU %d is busy (%.0f MB used); not using it", sample.index, used)
                continue
            info = infos.get(sample.index)
            slots.append(Slot(sample.index, info.uuid if info else None))
        if max_slots is not None:
            slots = slots[:max_slots]
        self._slots = slots or [Slot()]

    def slots(self) -> list[Slot]:
        return list(self._slots)

    def run(self, jobs: Sequence[Any], work: Work, stop: threading.Event) -> None:
        def one(job: Any, slot: Slot) -> None:
            task = work.start(job)
            result = work.run_here(task, slot, stop)
            if result is not None:
                work.finish(task, result)

        if len(self._slots) == 1:
            # One slot: run in this thread, so Ctrl-C reaches the running job directly.
            for job in jobs:
                if stop.is_set():
                    break
                one(job, self._slots[0])
            return
        pending: queue.Queue[Any] = queue.Queue()
        for job in jobs:
            pending.put(job)
        errors: list[BaseException] = []

        def worker(slot: Slot) -> None:
            while not stop.is_set():
                try:
                    job = pending.get_nowait()
                except queue.Empty:
                    return
                try:
                    one(job, slot)
                except BaseException as error:
                    errors.append(error)
                    stop.set()
                    return

        threads = [
            threading.Thread(target=worker, args=(s,), name=f"slot-{s.label}") for s in self._slots
        ]
        for thread in threads:
            thread.start()
        try:
            for thread in threads:
                while thread.is_alive():
                    thread.join(timeout=0.2)
        except KeyboardInterrupt:
            stop.set()
            for thread in threads:
                thread.join()
            raise
        if errors:
            raise errors[0]

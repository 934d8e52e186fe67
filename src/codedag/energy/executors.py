"""Where experiments run: the executor interface and the local executor.

The local executor gives each free GPU one slot (the experiment sees only that GPU through
``CUDA_VISIBLE_DEVICES``) and runs one experiment per slot at a time, so no two energy windows
overlap on a GPU. A machine without a free GPU has one CPU slot: experiments run one at a time.
"""

from __future__ import annotations

import logging
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from codedag.monitor.devices.gpus import GPUs

log = logging.getLogger(__name__)

JobT = TypeVar("JobT")


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


Work = Callable[[Any, Slot, threading.Event], None]


class Executor(ABC):
    """Runs jobs on slots; ``work(job, slot, stop)`` runs one job and must honour ``stop``."""

    @abstractmethod
    def slots(self) -> list[Slot]:
        """The slots jobs run on (their count is the concurrency)."""

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
        if len(self._slots) == 1:
            # One slot: run in this thread, so Ctrl-C reaches the running job directly.
            for job in jobs:
                if stop.is_set():
                    break
                work(job, self._slots[0], stop)
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
                    work(job, slot, stop)
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

"""Persistent DataLoader workers seeded at each epoch's start as fresh workers would be.

Without persistent workers, torch starts new workers at every epoch: it draws a base seed from
the loader's generator (``loader.generator``, or torch's global one) when the epoch's iterator
is created, before the sampler draws the epoch's order, and each worker seeds Python's
``random``, torch and NumPy's global state from it (``base_seed + worker_id``; NumPy through
``_generate_state``) and runs the program's ``worker_init_fn``. A persistent worker does all this
once: from the second epoch on its random draws continue where they stopped, and since no base
seed is drawn the sampler's shuffle continues from another point of the generator too. The same
samples then get other augmentations, in another order.

:class:`EpochSeeds` makes a persistent loader draw what fresh workers would draw:

* in the training process, :meth:`EpochSeeds.next_epoch` (called from the patched
  ``DataLoader.__iter__`` before the iterator resumes its workers) draws the base seed from the
  loader's generator, as a new iterator would, and writes it with an epoch count to shared memory;
* in each worker, the fetcher torch creates when an epoch resumes (``_DatasetKind.create_fetcher``,
  patched in the worker process only, when the worker starts) first re-seeds ``random``, torch and
  NumPy exactly as ``_worker_loop`` seeds a new worker, renews ``get_worker_info()``, and runs the
  program's ``worker_init_fn`` again.

State a data set keeps in its own objects (a generator it holds, a buffer it fills) is not reset:
a fresh worker would get the training process's copy. :func:`reseedable` says when the scheme
holds for a DataLoader.
"""

from __future__ import annotations

import inspect
import multiprocessing
import random
import threading
from collections.abc import Callable
from typing import Any

from codedag.migrate.worker_threads import WorkerThreads

FETCHER_TARGET = "torch.utils.data.dataloader._DatasetKind.create_fetcher"

# The worker process's own state: the seeds it follows and the epoch it was last seeded for.
_WORKER: dict[str, Any] = {}
_WORKER_LOCK = threading.Lock()


def _generate_state() -> Callable[[int, int], Any] | None:
    """torch's NumPy seeding of a worker (``_generate_state(base_seed, worker_id)``)."""
    try:
        from torch.utils.data._utils import worker
    except ImportError:  # pragma: no cover - every torch codedag supports has it
        return None
    return getattr(worker, "_generate_state", None)


def _lazy_iter(sampler: Any) -> bool:
    """Whether iterating ``sampler`` draws nothing before its first item (a generator)."""
    method = getattr(type(sampler), "__iter__", None)
    return method is not None and inspect.isgeneratorfunction(method)


def reseedable(explicit: dict[str, Any]) -> str | None:
    """Why persistent workers of a DataLoader created with ``explicit`` arguments cannot be
    seeded each epoch as fresh ones would be, or ``None`` when they can.

    The base seed is drawn before the sampler's draws only where the sampler draws nothing
    until its first item (torch's samplers, any ``__iter__`` written as a generator).
    """
    from torch.utils.data import IterDataPipe

    if _generate_state() is None:
        return "this torch has no _generate_state to seed NumPy in workers"
    if isinstance(explicit.get("dataset"), IterDataPipe):
        return "an IterDataPipe is seeded through its own shared seed"
    batch_sampler = explicit.get("batch_sampler")
    sampler = explicit.get("sampler")
    if batch_sampler is not None and not _lazy_iter(batch_sampler):
        return f"the batch sampler {type(batch_sampler).__qualname__} draws when iterated"
    unbatched = batch_sampler is None and explicit.get("batch_size", 1) is None
    if unbatched and sampler is not None and not _lazy_iter(sampler):
        return f"the sampler {type(sampler).__qualname__} draws when iterated"
    return None


class EpochSeeds:
    """The base seed of a persistent loader's current epoch, shared with its workers.

    Picklable for workers started by ``fork``, ``spawn`` or ``forkserver`` (the shared memory
    travels with the worker's arguments).
    """

    def __init__(self) -> None:
        # [epoch, base seed]: written by the training process, read by the workers.
        self._cell = multiprocessing.RawArray("q", 2)

    @property
    def epoch(self) -> int:
        """Epochs the training process started after the workers' first."""
        return int(self._cell[0])

    @property
    def base_seed(self) -> int:
        """The base seed of the current epoch (meaningful once :attr:`epoch` is past 0)."""
        return int(self._cell[1])

    def next_epoch(self, loader: Any) -> bool:
        """Before ``loader`` resumes its persistent workers: draw the epoch's base seed from
        its generator, as a new iterator would; returns whether one was drawn (not when the
        next ``iter()`` starts new workers, which torch seeds itself)."""
        iterator = getattr(loader, "_iterator", None)
        if not (loader.persistent_workers and loader.num_workers > 0 and iterator is not None):
            return False
        import torch

        base = int(torch.empty((), dtype=torch.int64).random_(generator=loader.generator).item())
        self._cell[1] = base
        self._cell[0] = self._cell[0] + 1
        iterator._base_seed = base
        return True

    # ------------------------------------------------------------------ in a worker
    def start_worker(self, worker_id: int, init: Callable[[int], Any] | None) -> None:
        """In a worker, at its start: follow these seeds from now on; ``init`` is the
        program's own ``worker_init_fn``, run again at each later epoch."""
        with _WORKER_LOCK:
            _WORKER.update(seeds=self, worker_id=worker_id, init=init, epoch=self.epoch)
            if "patcher" not in _WORKER:
                from codedag.patching import Patcher

                patcher = Patcher("codedag-epoch-seeds")
                patcher.patch(FETCHER_TARGET, _fetcher_factory, rebind_references=False)
                _WORKER["patcher"] = patcher


class ReseededWorkerThreads(WorkerThreads):
    """:class:`WorkerThreads` for workers kept across epochs: at a worker's start it also
    makes the worker follow ``seeds`` (re-seeded at each later epoch's start, the program's
    ``worker_init_fn`` run again)."""

    def __init__(
        self,
        threads: int | None,
        user_init: Callable[[int], Any] | None = None,
        seeds: EpochSeeds | None = None,
    ) -> None:
        if seeds is None:
            seeds = getattr(user_init, "seeds", None) or EpochSeeds()
        super().__init__(threads, user_init)
        self.seeds: EpochSeeds = seeds

    def __call__(self, worker_id: int) -> None:
        self.seeds.start_worker(worker_id, self.user_init)
        super().__call__(worker_id)

    def __eq__(self, other: object) -> bool:
        return super().__eq__(other) and getattr(other, "seeds", None) is self.seeds

    def __hash__(self) -> int:
        return hash((self.threads, id(self.user_init), id(self.seeds)))

    def __repr__(self) -> str:
        return super().__repr__().replace("WorkerThreads(", "WorkerThreads(re-seeded each epoch, ")


def worker_init(
    threads: int | None, user_init: Callable[[int], Any] | None, seeds: EpochSeeds | None
) -> Callable[[int], Any] | None:
    """The ``worker_init_fn`` setting ``threads`` (``None``: leave them) and following
    ``seeds`` (``None``: none) before the program's own ``user_init``."""
    if seeds is not None:
        return ReseededWorkerThreads(threads, user_init, seeds)
    if threads is not None:
        return WorkerThreads(threads, user_init)
    return user_init


def seeds_of(init: Any) -> EpochSeeds | None:
    """The per-epoch seeds a ``worker_init_fn`` follows (``None``: none)."""
    return init.seeds if isinstance(init, ReseededWorkerThreads) else None


def _fetcher_factory(original: Callable[..., Any]) -> Callable[..., Any]:
    def create_fetcher(*args: Any, **kwargs: Any) -> Any:
        seeds: EpochSeeds | None = _WORKER.get("seeds")
        if seeds is not None and seeds.epoch != _WORKER["epoch"]:
            _WORKER["epoch"] = seeds.epoch
            reseed(seeds.base_seed, _WORKER["worker_id"])
            init = _WORKER["init"]
            if init is not None:
                init(_WORKER["worker_id"])
        return original(*args, **kwargs)

    return create_fetcher


def reseed(base_seed: int, worker_id: int) -> None:
    """Seed this worker as torch's ``_worker_loop`` seeds a new one, and renew its info."""
    import torch
    from torch.utils.data._utils import worker

    seed = base_seed + worker_id
    random.seed(seed)
    torch.manual_seed(seed)
    generate = _generate_state()
    try:
        import numpy as np
    except ImportError:  # pragma: no cover - numpy is a dependency of codedag
        np = None  # type: ignore[assignment]
    if np is not None and generate is not None:
        np.random.seed(generate(base_seed, worker_id))
    info = worker._worker_info
    if info is not None:
        worker._worker_info = worker.WorkerInfo(
            id=info.id, num_workers=info.num_workers, seed=seed, dataset=info.dataset
        )

"""Epochs the prefix cache serves, loaded with the settings measured for them.

Once the prefix cache holds a data set's values, loading a sample is mostly reading it back, and
moving the sample from a worker process to the training process can cost more than the read: the
plan's ``loader.warm`` settings (:class:`~codedag.plan.loader.WarmLoader`) were measured for such
epochs. :class:`WarmSwitch` decides, each time a DataLoader starts an epoch (``__iter__``),
which settings it runs with:

* the first epoch over a data set, and every epoch after one the cache did not serve, runs with
  the DataLoader's own settings (the section's ``chosen`` ones, where the plan set them);
* an epoch runs warm when the one before it, over the same data set, looked up at least
  ``ready_share`` of the samples its sampler holds, and at least that share of its lookups were
  hits or values queued for storing (not refused by a full store, nor evicted since);
* a warm epoch whose hits fall below that share (values evicted, files changed) ends the switching
  for that data set: the following epochs run cold, and the log says why.

Switching sets ``num_workers``, ``prefetch_factor`` and the workers' thread setter on the
DataLoader object itself, which torch allows between epochs; a DataLoader keeping persistent
workers has them shut down first (they start again when an epoch goes back to workers). The
counts come from :meth:`PrefixCacheRuntime.progress
<codedag.migrate.cache.runtime.PrefixCacheRuntime.progress>`, which workers update with each
batch. :meth:`WarmSwitch.restore_loaders` puts every DataLoader still alive back as it was.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from codedag.migrate.cache.runtime import CacheProgress
from codedag.migrate.epoch_seeds import seeds_of, worker_init
from codedag.migrate.stats import WarmStats
from codedag.migrate.worker_threads import threads_of, user_worker_init
from codedag.plan.loader import DEFAULT_PREFETCH, LoaderSettings, WarmLoader

log = logging.getLogger(__name__)

SWITCHED = ("num_workers", "prefetch_factor", "threads")
"""The settings a DataLoader can change between epochs."""


@dataclass
class _Epochs:
    """What is known of the epochs over one data set."""

    mark: CacheProgress
    warm: bool
    samples: int | None
    dataset: Callable[[], Any]
    """The data set (a weak reference where it allows one): an id is reused once it is gone."""
    stopped: str = ""


@dataclass(frozen=True)
class _Original:
    num_workers: int
    prefetch_factor: int | None
    worker_init_fn: Any


def _samples(loader: Any) -> int | None:
    try:
        return len(loader.sampler)
    except TypeError:
        return None


def _reference(dataset: Any) -> Callable[[], Any]:
    try:
        return weakref.ref(dataset)
    except TypeError:  # no weak references: held strongly (the DataLoader holds it anyway)
        return lambda: dataset


class WarmSwitch:
    """Chooses each epoch's settings for the DataLoaders it is given (see the module docstring).

    Args:
        warm: the section's warm part (its settings within this machine's bounds).
        progress: the prefix cache's counts of every process.
    """

    def __init__(self, warm: WarmLoader, progress: Callable[[], CacheProgress]) -> None:
        self.warm = warm
        self.progress = progress
        self._lock = threading.Lock()
        self._epochs: dict[int, _Epochs] = {}
        self._originals: weakref.WeakKeyDictionary[Any, _Original] = weakref.WeakKeyDictionary()
        self.counts: Counter[str] = Counter()
        self.stopped: dict[str, str] = {}

    def bound(self, cpus: float) -> list[str]:
        """Lower the warm settings to what ``cpus`` usable CPUs justify; returns what was
        lowered (:meth:`LoaderSettings.bounded <codedag.plan.loader.LoaderSettings.bounded>`)."""
        chosen, changes = self.warm.chosen.bounded(cpus)
        if changes:
            self.warm = self.warm.model_copy(update={"chosen": chosen})
        return changes

    def switchable(self, explicit: set[str], override: set[str]) -> frozenset[str]:
        """The warm settings a DataLoader may switch: those the program did not pass
        explicitly (``explicit``), and those the plan overrides (``persistent_workers`` is
        fixed when a DataLoader is created, and ``pin_memory`` is never changed here)."""
        return frozenset(k for k in self._changed() if k not in explicit or k in override)

    def kept(self, explicit: set[str], override: set[str]) -> list[str]:
        """The warm settings the program passes explicitly and the plan does not override:
        they stay as the program set them."""
        return [k for k in self._changed() if k in explicit and k not in override]

    def _changed(self) -> list[str]:
        return [k for k in self.warm.changed if k in SWITCHED]

    def before_epoch(self, loader: Any, keys: frozenset[str]) -> bool:
        """Set ``loader``'s ``keys`` for the epoch it starts; returns whether it runs warm."""
        if not keys:
            return False
        with self._lock:
            now = self.progress()
            dataset = loader.dataset
            last = self._epochs.get(id(dataset))
            if last is not None and last.dataset() is not dataset:
                last = None  # another data set, at the address of one that is gone
            warm = last is not None and self._serves(last, now.since(last.mark), loader)
            self._epochs[id(dataset)] = _Epochs(
                now, warm, _samples(loader), _reference(dataset), last.stopped if last else ""
            )
            self.counts["warm epochs" if warm else "cold epochs"] += 1
            if warm:
                self._set(loader, self.warm.chosen, keys)
            else:
                self._put_back(loader)
            return warm

    def _serves(self, last: _Epochs, epoch: CacheProgress, loader: Any) -> bool:
        """Whether the cache will serve the next epoch, judged by the last one's counts."""
        if last.stopped:
            return False
        share = self.warm.ready_share
        if last.warm:
            if epoch.lookups and epoch.hits >= share * epoch.lookups:
                return True
            last.stopped = (
                f"a warm epoch read {epoch.hits} of {epoch.lookups} values from the cache "
                f"(less than {share:.0%}): the following epochs run with the DataLoader's own "
                "settings"
            )
            self.stopped[type(loader.dataset).__qualname__] = last.stopped
            log.warning("prefix cache: %s", last.stopped)
            return False
        looked_up = last.samples is None or epoch.lookups >= share * last.samples
        return bool(looked_up and epoch.lookups and epoch.ready >= share * epoch.lookups)

    def _set(self, loader: Any, settings: LoaderSettings, keys: frozenset[str]) -> None:
        current = (loader.num_workers, loader.prefetch_factor, loader.worker_init_fn)
        workers, prefetch, init = current
        if "num_workers" in keys:
            workers = settings.num_workers
        if workers and (not prefetch or "prefetch_factor" in keys):
            prefetch = settings.prefetch_factor or prefetch or DEFAULT_PREFETCH
        if "threads" in keys and threads_of(init) != settings.threads:
            # the per-epoch seeds of workers the plan keeps across epochs survive a switch
            init = worker_init(settings.threads, user_worker_init(loader), seeds_of(init))
        wanted = (workers, prefetch, init)
        if wanted == current:
            return
        if loader not in self._originals:
            self._originals[loader] = _Original(*current)
        self._stop_workers(loader)
        loader.num_workers, loader.prefetch_factor, loader.worker_init_fn = wanted
        self.counts["switches"] += 1

    @staticmethod
    def _stop_workers(loader: Any) -> None:
        """Shut down a DataLoader's persistent workers before its settings change."""
        iterator = getattr(loader, "_iterator", None)
        if iterator is None:
            return
        shutdown = getattr(iterator, "_shutdown_workers", None)
        if shutdown is not None:
            shutdown()
        loader._iterator = None

    def _put_back(self, loader: Any) -> bool:
        original = self._originals.pop(loader, None)
        if original is None:
            return False
        self._stop_workers(loader)
        loader.num_workers = original.num_workers
        loader.prefetch_factor = original.prefetch_factor
        loader.worker_init_fn = original.worker_init_fn
        return True

    def restore_loaders(self) -> int:
        """Put every switched DataLoader still alive back to its own settings; returns how many."""
        with self._lock:
            return sum(self._put_back(loader) for loader in list(self._originals.keys()))

    def stats(self) -> WarmStats:
        """Epochs run cold and warm, switches made, and why switching stopped where it did."""
        return WarmStats.model_validate(
            {
                "settings": self.warm.chosen.model_dump(mode="json"),
                "changed": list(self.warm.changed),
                "warm_epochs": self.counts["warm epochs"],
                "cold_epochs": self.counts["cold epochs"],
                "switches": self.counts["switches"],
                "stopped": dict(self.stopped),
            }
        )

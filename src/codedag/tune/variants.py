"""A DataLoader's settings, and copies of it with other settings (same dataset, sampler, collate).

The tuner never re-runs the program's factory: it builds each variant from the DataLoader it was
given, with the same dataset, batch sampler (so the same batch composition), ``collate_fn``,
generator, multiprocessing context and ``worker_init_fn`` (wrapped, when threads are set), and
only the tuned settings changed. While timing, the batch sampler repeats itself so that a short
epoch does not end a measurement early.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from codedag.errors import ConfigError
from codedag.migrate.worker_threads import WorkerThreads, threads_of, user_worker_init
from codedag.plan.loader import TUNABLE_KEYS, LoaderSettings

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

WORKER_TIMEOUT_S = 300.0
"""A worker batch slower than this while tuning is a failure, not a wait without end."""


class RepeatSampler:
    """Iterate a sampler (or batch sampler) again and again; stops only when it yields nothing."""

    def __init__(self, sampler: Iterable[Any]) -> None:
        self.sampler = sampler

    def __iter__(self) -> Iterator[Any]:
        while True:
            empty = True
            for item in self.sampler:
                empty = False
                yield item
            if empty:
                return


def check_loader(loader: object) -> None:
    """Raise :class:`ConfigError` when ``loader`` is not a ``torch.utils.data.DataLoader``."""
    from torch.utils.data import DataLoader

    if not isinstance(loader, DataLoader):
        raise ConfigError(f"expected a torch.utils.data.DataLoader, got {type(loader).__name__}")


def is_iterable_dataset(loader: DataLoader[Any]) -> bool:
    """Whether ``loader`` reads an ``IterableDataset`` (no sampler to repeat)."""
    from torch.utils.data import IterableDataset

    return isinstance(loader.dataset, IterableDataset)


def current_settings(loader: DataLoader[Any]) -> LoaderSettings:
    """The tunable settings ``loader`` was created with."""
    threads = threads_of(loader.worker_init_fn)
    workers = int(loader.num_workers)
    return LoaderSettings(
        num_workers=workers,
        threads=threads if workers else None,
        prefetch_factor=loader.prefetch_factor if workers else None,
        persistent_workers=bool(loader.persistent_workers) if workers else False,
        pin_memory=bool(loader.pin_memory),
    )


def epoch_length(loader: DataLoader[Any]) -> int | None:
    """Batches per epoch, where the sampler knows its length."""
    try:
        return len(loader)
    except TypeError:
        return None


def build_variant(
    loader: DataLoader[Any],
    settings: LoaderSettings,
    *,
    endless: bool = True,
    timeout_s: float = WORKER_TIMEOUT_S,
) -> Any:
    """A new DataLoader like ``loader`` with ``settings``; its sampler repeats when ``endless``.

    The torch default (``None``) of ``prefetch_factor`` is left to torch; ``persistent_workers``
    and ``prefetch_factor`` are passed only with workers, as torch requires. With workers, a
    batch that takes longer than ``timeout_s`` raises instead of hanging the measurement
    (unless the DataLoader sets its own timeout).
    """
    from torch.utils.data import DataLoader

    accepted = inspect.signature(DataLoader.__init__).parameters
    user_init = user_worker_init(loader)
    kwargs: dict[str, Any] = {
        "dataset": loader.dataset,
        "collate_fn": loader.collate_fn,
        "num_workers": settings.num_workers,
        "pin_memory": settings.pin_memory,
        "timeout": loader.timeout,
        "multiprocessing_context": loader.multiprocessing_context,
        "generator": loader.generator,
        "worker_init_fn": user_init,
    }
    for name in ("pin_memory_device", "in_order"):
        if name in accepted and hasattr(loader, name):
            kwargs[name] = getattr(loader, name)
    if settings.num_workers:
        kwargs["persistent_workers"] = settings.persistent_workers
        if settings.prefetch_factor is not None:
            kwargs["prefetch_factor"] = settings.prefetch_factor
        if settings.threads is not None:
            kwargs["worker_init_fn"] = WorkerThreads(settings.threads, user_init)
        if not loader.timeout:
            kwargs["timeout"] = timeout_s
    if is_iterable_dataset(loader):
        kwargs.update(batch_size=loader.batch_size, drop_last=loader.drop_last)
    elif loader.batch_sampler is not None:
        sampler = loader.batch_sampler
        kwargs["batch_sampler"] = RepeatSampler(sampler) if endless else sampler
    else:  # batch_size=None: the sampler yields keys of whole batches
        kwargs.update(
            batch_size=None,
            sampler=RepeatSampler(loader.sampler) if endless else loader.sampler,
        )
    return DataLoader(**kwargs)


def describe_changes(chosen: LoaderSettings, yours: LoaderSettings) -> str:
    """``num_workers 0 -> 2, threads default -> 1``: what the plan changes, in words."""
    parts = []
    for key, (new, old) in chosen.differences(yours).items():
        parts.append(f"{key} {_word(old)} -> {_word(new)}")
    return ", ".join(parts) if parts else "nothing"


def _word(value: object) -> str:
    if value is None:
        return "default"
    if isinstance(value, bool):
        return "on" if value else "off"
    return str(value)


__all__ = [
    "TUNABLE_KEYS",
    "RepeatSampler",
    "build_variant",
    "check_loader",
    "current_settings",
    "describe_changes",
    "epoch_length",
    "user_worker_init",
]

"""DataLoader construction shared by the example pipelines: seeding as real projects do it.

Augmentations draw from NumPy's and Python's global random state (``np.random.uniform``,
``random.random``), like YOLO's and most Kaggle datasets. PyTorch seeds each worker's torch RNG
from the loader's generator (``base_seed + worker_id``) but not NumPy's or ``random``'s, so
without help every worker would draw the same augmentations. :func:`seed_worker` is the
``worker_init_fn`` the PyTorch reproducibility notes recommend: it seeds both from
``torch.initial_seed()``. With ``num_workers=0`` there is no worker to initialize, so
:func:`build_loader` seeds the main process's NumPy and ``random`` state from ``seed`` when it
builds the loader, as a training script's ``seed_everything(seed)`` would (torch's too, which
torchvision-style transforms draw from).

Either way, building a loader with the same seed and taking its batches gives bit-identical
batches. The two settings draw from different streams, so a run with workers and one without
see different augmentations, as in any real project.
"""

from __future__ import annotations

import inspect
import os
import random
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.errors import ConfigError


def seed_worker(worker_id: int) -> None:
    """Seed NumPy and ``random`` in a DataLoader worker from torch's per-worker seed."""
    worker_seed = torch.initial_seed() % 2**32
    np.random.seed(worker_seed)
    random.seed(worker_seed)


@dataclass(frozen=True)
class LoaderOptions:
    """The DataLoader settings a pipeline's ``make_loader`` passes on as they are.

    Args:
        drop_last: drop the last incomplete batch.
        pin_memory: copy batches into pinned memory (for fast host-to-device copies).
        persistent_workers: keep workers alive between epochs (needs ``num_workers > 0``).
        prefetch_factor: batches loaded in advance per worker (needs ``num_workers > 0``).
    """

    drop_last: bool = False
    pin_memory: bool = False
    persistent_workers: bool = False
    prefetch_factor: int | None = None

    def check(self, batch_size: int, num_workers: int, seed: int) -> None:
        """Raise :class:`ConfigError` naming the first loader setting that cannot work with
        these options."""
        check_loader_settings(
            batch_size, num_workers, seed, self.persistent_workers, self.prefetch_factor
        )

    def dataloader_kwargs(self, num_workers: int) -> dict[str, Any]:
        """The DataLoader keywords for these options with ``num_workers`` workers (the two that
        need workers only with some)."""
        kwargs: dict[str, Any] = {"drop_last": self.drop_last, "pin_memory": self.pin_memory}
        if num_workers > 0:
            kwargs["persistent_workers"] = self.persistent_workers
            if self.prefetch_factor is not None:
                kwargs["prefetch_factor"] = self.prefetch_factor
        return kwargs


LOADER_OPTIONS = tuple(f.name for f in fields(LoaderOptions))


def build_loader(
    dataset: Dataset,
    *,
    batch_size: int,
    num_workers: int,
    seed: int,
    shuffle: bool = True,
    collate_fn: Callable[[list[Any]], Any] | None = None,
    **options: Any,
) -> DataLoader:
    """A DataLoader over ``dataset`` whose batches depend only on ``seed`` and the settings.

    Args:
        dataset: a map-style Dataset.
        batch_size: samples per batch.
        num_workers: worker processes (0: load in the calling process).
        seed: seeds the sampler's generator, hence the workers' seeds; with no workers, NumPy's
            and ``random``'s global state too.
        shuffle: draw samples in a random order from the seeded generator.
        collate_fn: how samples become a batch (torch's default when None).
        options: :class:`LoaderOptions` (``drop_last``, ``pin_memory``, ``persistent_workers``,
            ``prefetch_factor``).
    """
    loader_options = LoaderOptions(**options)
    loader_options.check(batch_size, num_workers, seed)
    if num_workers == 0:
        np.random.seed(seed % 2**32)
        random.seed(seed)
        torch.manual_seed(seed)  # torchvision-style transforms draw from torch's global state
    return DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=shuffle,
        num_workers=num_workers,
        collate_fn=collate_fn,
        worker_init_fn=seed_worker,
        generator=torch.Generator().manual_seed(seed),
        **loader_options.dataloader_kwargs(num_workers),
    )


def check_loader_settings(
    batch_size: int,
    num_workers: int,
    seed: int,
    persistent_workers: bool = False,
    prefetch_factor: int | None = None,
) -> None:
    """Raise :class:`ConfigError` naming the first loader setting that cannot work."""
    for name, value, low in (("batch_size", batch_size, 1), ("num_workers", num_workers, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise ConfigError(f"{name} must be an integer >= {low}, got {value!r}")
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    if num_workers == 0 and persistent_workers:
        raise ConfigError("persistent_workers=True needs num_workers > 0")
    if prefetch_factor is not None:
        if num_workers == 0:
            raise ConfigError("prefetch_factor needs num_workers > 0")
        if not isinstance(prefetch_factor, int) or prefetch_factor < 1:
            raise ConfigError(f"prefetch_factor must be an integer >= 1, got {prefetch_factor!r}")


def check_sizes(**sizes: int) -> None:
    """Raise :class:`ConfigError` for a size that is not a positive integer."""
    for name, value in sizes.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")


@dataclass(eq=False, repr=False)
class FileDataset(Dataset):
    """A Dataset of files, one sample each; a subclass adds its settings as fields and its
    ``__getitem__``. The ``paths`` are kept as strings, what a worker is sent. A dataclass:
    ``eq=False`` compares and hashes it by identity, as any Dataset."""

    paths: Sequence[str | os.PathLike[str]]

    def __post_init__(self) -> None:
        self.paths = [str(p) for p in self.paths]

    def __len__(self) -> int:
        return len(self.paths)


def data_folder(root: str | None, name: str) -> Path:
    """The folder of a pipeline's data files: ``root``, else ``name`` under the system's
    temporary folder."""
    return Path(root) if root else Path(tempfile.gettempdir()) / name


def loader_maker(
    make_dataset: Callable[..., Dataset],
    *,
    batch_size: int = 16,
    n: int = 64,
    collate_fn: Callable[[list[Any]], Any] | None = None,
    batching: str = "",
) -> Callable[..., DataLoader]:
    """A pipeline's ``make_loader(batch_size, num_workers, seed, *, n, shuffle, **options)``
    over ``make_dataset`` (its defaults ``batch_size`` and ``n``), documented with the options
    ``make_dataset`` takes (its parameters but ``n`` and ``seed``) and, in ``batching``, how it
    batches."""

    def make_loader(
        batch_size: int = batch_size,
        num_workers: int = 0,
        seed: int = 0,
        *,
        n: int = n,
        shuffle: bool = True,
        **options: Any,
    ) -> DataLoader:
        return loader_from_factory(
            make_dataset,
            batch_size,
            num_workers,
            seed,
            n=n,
            shuffle=shuffle,
            options=options,
            collate_fn=collate_fn,
        )

    dataset_options = ", ".join(f"``{p}``" for p in dataset_parameters(make_dataset))
    make_loader.__module__ = make_dataset.__module__
    make_loader.__qualname__ = make_loader.__name__
    make_loader.__doc__ = (
        f"A DataLoader over :func:`make_dataset`{batching}; ``options`` go to it or to the "
        f"DataLoader.\n\nDataset options: {dataset_options}. Loader options: "
        + ", ".join(f"``{o}``" for o in LOADER_OPTIONS)
        + "."
    )
    return make_loader


def dataset_parameters(make_dataset: Callable[..., Dataset]) -> list[str]:
    """The options ``make_dataset`` takes, in order: its parameters but ``n`` and ``seed``."""
    return [p for p in inspect.signature(make_dataset).parameters if p not in ("n", "seed")]


def loader_from_factory(
    make_dataset: Callable[..., Dataset],
    batch_size: int,
    num_workers: int,
    seed: int,
    *,
    n: int,
    shuffle: bool,
    options: dict[str, Any],
    collate_fn: Callable[[list[Any]], Any] | None = None,
) -> DataLoader:
    """A pipeline's ``make_loader``: ``options`` go to ``make_dataset`` or to the DataLoader.

    Raises:
        ConfigError: an option neither ``make_dataset`` nor the DataLoader takes.
    """
    dataset_params = set(dataset_parameters(make_dataset))
    unknown = sorted(set(options) - dataset_params - set(LOADER_OPTIONS))
    if unknown:
        accepted = ", ".join(sorted(dataset_params) + list(LOADER_OPTIONS))
        raise ConfigError(f"unknown option(s) {', '.join(unknown)}; accepted: {accepted}")
    sizes = {k: v for k, v in options.items() if k in dataset_params}
    loader_options = {k: v for k, v in options.items() if k in LOADER_OPTIONS}
    LoaderOptions(**loader_options).check(batch_size, num_workers, seed)
    return build_loader(
        make_dataset(n=n, seed=seed, **sizes),
        batch_size=batch_size,
        num_workers=num_workers,
        seed=seed,
        shuffle=shuffle,
        collate_fn=collate_fn,
        **loader_options,
    )

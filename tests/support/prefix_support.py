"""A small file-backed image Dataset and a hand-made cached chain for prefix cache tests."""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from torch.utils.data import DataLoader, Dataset, IterableDataset, get_worker_info

import codedag.migrate.cache.prefix_values as prefix_values
from codedag.migrate.cache.runtime import CacheSettings, PrefixCacheRuntime
from codedag.migrate.cache.session import ChainSpec
from codedag.store.meta import Meta
from codedag.store.tiers import PrefixStore, StoreSettings

CALLER = f"{__name__}.FileImages.__getitem__"


def storing_pays(monkeypatch: pytest.MonkeyPatch, pays: bool = True) -> None:
    """Every chain judged to pay for storing (``pays``) or not, whatever this machine times:
    tiny images can go either way, and a chain given up changes what a later run applies."""
    from codedag.migrate.cache.session import Session

    judge = Session.judge

    def judged(self: Session, chain: ChainSpec, compute_ns: int, store_ns: int) -> bool | None:
        costs = (store_ns + 1, store_ns) if pays else (compute_ns, compute_ns + 1)
        return judge(self, chain, *costs)

    monkeypatch.setattr(Session, "judge", judged)


def write_images(folder: Path, n: int = 8, size: int = 48, seed: int = 0) -> list[str]:
    """``n`` PNG files of noise with a square, ``size`` pixels; their paths."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(n):
        image = rng.integers(0, 255, (size, size + 8, 3), dtype=np.uint8)
        path = folder / f"img{i}.png"
        cv2.imwrite(str(path), image)
        paths.append(str(path))
    return paths


class FileDataset(Dataset):
    """Samples read from files by path, one file a sample (subclasses read them)."""

    def __init__(self, paths: list[str]) -> None:
        self.paths = paths

    def __len__(self) -> int:
        return len(self.paths)


class FileImages(Dataset):
    """imread, resize to ``out``, BGR->RGB (the prefix), then a flip drawn per index, to a tensor."""

    def __init__(self, paths: list[str], out: int = 32) -> None:
        self.paths = paths
        self.out = out

    def __len__(self) -> int:
        return len(self.paths)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        image = cv2.resize(image, (self.out, self.out), interpolation=cv2.INTER_AREA)
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        if np.random.default_rng(index).random() < 0.5:
            image = cv2.flip(image, 1)
        return torch.from_numpy(np.ascontiguousarray(image)), index


class FileStream(IterableDataset):
    """:class:`FileImages`' samples yielded by an iterable data set (each worker its share of
    the files, in order); ``fail_at``: the file whose sample raises ``ValueError``."""

    def __init__(self, paths: list[str], fail_at: int | None = None) -> None:
        self.paths = paths
        self.fail_at = fail_at

    def __iter__(self) -> Iterator[tuple[torch.Tensor, int]]:
        info = get_worker_info()
        indices = range(len(self.paths))
        if info is not None:
            indices = indices[info.id :: info.num_workers]
        for index in indices:
            image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
            image = cv2.resize(image, (32, 32), interpolation=cv2.INTER_AREA)
            image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
            if index == self.fail_at:
                raise ValueError(f"sample {index} is broken")
            if np.random.default_rng(index).random() < 0.5:
                image = cv2.flip(image, 1)
            yield torch.from_numpy(np.ascontiguousarray(image)), index


STREAM_CALLER = f"{__name__}.FileStream.__iter__"


class PlainFiles(FileImages):
    """A chain whose code asks its values nothing between the source and the cut."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        img = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        img = cv2.resize(img, (24, 24), interpolation=cv2.INTER_AREA)
        img = cv2.GaussianBlur(cv2.cvtColor(img, cv2.COLOR_BGR2RGB), (3, 3), 0)
        return torch.from_numpy(np.ascontiguousarray(img)), index


class DrawingFiles(FileImages):
    """:class:`FileImages` whose samples also carry a draw of each global generator (Python's,
    NumPy's, torch's) and the prefix cache hits counted so far in the process that loads them,
    read from the plan a spawned worker applied (-1: none applied)."""

    def __getitem__(self, index: int) -> Any:
        from codedag.migrate.spawned_workers import _APPLIED

        image, index = super().__getitem__(index)
        draws = torch.tensor([random.random(), np.random.rand(), float(torch.rand(1))])
        applied = _APPLIED[0] if _APPLIED else None
        hits = -1 if applied is None else int(applied.cache.session.counts["hits"])
        return image, index, draws, hits


def count_store_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls of the store's reads (``meta``, ``get``, ``flag``) from now on, by name."""
    counts: Counter[str] = Counter()
    for name in ("meta", "get", "flag"):
        original = getattr(PrefixStore, name)

        def counted(self: PrefixStore, *args: Any, _name: str = name, _f: Any = original) -> Any:
            counts[_name] += 1
            return _f(self, *args)

        monkeypatch.setattr(PrefixStore, name, counted)
    return counts


def chain(cut: str = "cv2.cvtColor", caller: str = CALLER) -> ChainSpec:
    """The cached chain of :class:`FileImages` (source ``cv2.imread``; ``caller``: the function
    calling it, :data:`STREAM_CALLER` for :class:`FileStream`)."""
    return ChainSpec(
        "prefix0",
        "cv2.imread",
        "0",
        (caller,),
        ("cv2.cvtColor", "cv2.imread", "cv2.resize"),
        cut,
        0,
    )


def cache_section() -> dict[str, Any]:
    """A plan's ``cache`` section caching :func:`chain`."""
    spec = chain()
    cached = {
        "id": spec.id,
        "source_function": spec.source_function,
        "source_slot": spec.source_slot,
        "callers": list(spec.callers),
        "functions": list(spec.functions),
        "cached": True,
        "cut": {"step": spec.cut_function, "occurrence": spec.cut_occurrence},
    }
    return {"chains": [cached]}


def runtime(
    folder: Path,
    verify: int = 0,
    ram: int = 64 << 20,
    disk: int = 64 << 20,
    judge_after: int = 0,
    store_share: float = 0.0,
    caller: str = CALLER,
) -> PrefixCacheRuntime:
    """A runtime caching :func:`chain` in ``folder`` (its tiny images cost about what storing
    them does: by default the chain is never given up for its cost, and every value is stored
    in the epoch that computes it; ``store_share`` needs ``judge_after``)."""
    store = StoreSettings(folder=folder, ram_budget_bytes=ram, disk_budget_bytes=disk)
    settings = CacheSettings(
        verify=verify, store=store, judge_after=judge_after, store_share=store_share
    )
    return PrefixCacheRuntime([chain(caller=caller)], settings)


def epoch(dataset: Dataset, workers: int = 0, batch_size: int = 4) -> list[Any]:
    """Every batch of one epoch, in order."""
    loader = DataLoader(dataset, batch_size=batch_size, num_workers=workers, shuffle=False)
    return [images.clone() for images, _ in loader]


def equal(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    """Bit-identical batches."""
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


@dataclass
class StubChain:
    """A chain cut at a call named ``cut``."""

    id: str = "prefix0"
    cut_function: str = "cut"
    cut_occurrence: int = 0
    methods: frozenset[str] | None = None  # any method recorded


@dataclass
class StubSession:
    """Knows the headers in ``known`` (those in ``stale`` from an older generation); records
    misses, samples no epoch can cache, cuts and the headers asked for."""

    known: dict[bytes, Meta] = field(default_factory=dict)
    misses: list[tuple[str, str]] = field(default_factory=list)
    cuts: list[tuple[bytes, bool]] = field(default_factory=list)
    asked: list[bytes] = field(default_factory=list)
    stale: set[bytes] = field(default_factory=set)
    never: list[tuple[str, str]] = field(default_factory=list)

    def miss(self, chain_id: str, reason: str) -> None:
        self.misses.append((chain_id, reason))

    def never_cached(self, chain: Any, why: str) -> None:
        self.never.append((chain.id, why))

    def meta(self, key: bytes) -> tuple[Meta, bool] | None:
        self.asked.append(key)
        meta = self.known.get(key)
        return None if meta is None else (meta, key in self.stale)

    def cut(
        self,
        first: Any,
        key: bytes,
        deferred: bool,
        function: Any,
        args: Any,
        kw: Any,
        joined: tuple[Any, ...] = (),
    ) -> Any:
        self.cuts.append((key, deferred))
        return function(*prefix_values.concrete(args), **prefix_values.concrete_kwargs(kw))

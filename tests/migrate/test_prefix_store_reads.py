"""What a sample's chain asks of the store: the reads of its first epoch (nothing stored) and of
a later one (every value stored), counted per sample, with batches equal to the uncached run."""

from __future__ import annotations

import dataclasses
from collections import Counter
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from prefix_support import (
    FileImages,
    PlainFiles,
    count_store_reads,
    epoch,
    equal,
    runtime,
    write_images,
)

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class Letterbox(FileImages):
    """Detector-style preprocessing: the decoded image's shape picks the resize and the padding,
    then color, blur, normalize and HWC->CHW (a method on a cv2 result and on an operator's)."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        img = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        height, width = img.shape[:2]
        ratio = min(40 / height, 40 / width)
        size = (round(width * ratio), round(height * ratio))
        img = cv2.resize(img, size, interpolation=cv2.INTER_LINEAR)
        img = cv2.copyMakeBorder(img, 1, 2, 3, 4, cv2.BORDER_CONSTANT, value=(114, 114, 114))
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        img = cv2.GaussianBlur(img, (3, 3), 0)
        x = (img.astype(np.float32) / 255.0 - MEAN) / STD
        x = np.ascontiguousarray(x.transpose(2, 0, 1))
        return torch.from_numpy(x), index


FUNCTIONS = (
    "cv2.imread",
    "cv2.resize",
    "cv2.copyMakeBorder",
    "cv2.cvtColor",
    "cv2.GaussianBlur",
    "numpy.ascontiguousarray",
)


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Calls of the store's reads, by name."""
    return count_store_reads(monkeypatch)


def _epochs(tmp_path: Path, dataset: FileImages, reads: Counter[str]) -> list[dict[str, int]]:
    rt = runtime(tmp_path / "cache")
    getitem = type(dataset).__getitem__
    caller = f"{getitem.__module__}.{getitem.__qualname__}"
    rt.chains[0] = dataclasses.replace(
        rt.chains[0], callers=(caller,), functions=FUNCTIONS, cut_function=FUNCTIONS[-1]
    )
    rt._sources = {"cv2.imread": rt.chains}
    reference = epoch(dataset)
    out = []
    rt.apply()
    try:
        for _ in range(3):
            reads.clear()
            assert equal(epoch(dataset), reference)
            out.append(dict(reads))
            rt.session.writer.flush()  # stored before the next epoch
    finally:
        rt.restore()
    stats = rt.stats()
    assert stats["misses"] == {"new": len(dataset)} and stats["hits"] == 2 * len(dataset)
    return out


def test_a_sample_reads_one_header_in_its_first_epoch_and_what_its_code_asks_after(
    tmp_path: Path, reads: Counter[str]
) -> None:
    n = 6
    dataset = Letterbox(write_images(tmp_path / "images", n=n))
    first, second, third = _epochs(tmp_path, dataset, reads)
    # the first epoch: one flag says the store holds no value of the chain; every sample's
    # chain is computed without a lookup
    assert first == {"flag": 1}
    # later: the source's header (it answers the shape), the two headers its code asks for
    # (the kinds of a cv2 result and of an operator's result, for their methods), the value
    assert second == third == {"meta": 3 * n, "get": n}


def test_a_chain_whose_code_asks_nothing_reads_the_value_alone(
    tmp_path: Path, reads: Counter[str]
) -> None:
    n = 4
    dataset = PlainFiles(write_images(tmp_path / "images", n=n))
    first, second, third = _epochs(tmp_path, dataset, reads)
    assert first == {"flag": 1}
    assert second == third == {"get": n}  # no header: the source waits for the cut too


class Blurred(PlainFiles):
    """:class:`PlainFiles` with another blur (a call after the source's changed argument)."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        img = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        img = cv2.resize(img, (24, 24), interpolation=cv2.INTER_AREA)
        img = cv2.GaussianBlur(cv2.cvtColor(img, cv2.COLOR_BGR2RGB), (5, 5), 0)
        return torch.from_numpy(np.ascontiguousarray(img)), index


def _run_once(folder: Path, dataset: FileImages) -> dict[str, Any]:
    rt = runtime(folder)
    getitem = type(dataset).__getitem__
    caller = f"{getitem.__module__}.{getitem.__qualname__}"
    rt.chains[0] = dataclasses.replace(
        rt.chains[0], callers=(caller,), functions=FUNCTIONS, cut_function=FUNCTIONS[-1]
    )
    rt._sources = {"cv2.imread": rt.chains}
    reference = epoch(dataset)
    rt.apply()
    try:
        assert equal(epoch(dataset), reference)
    finally:
        rt.restore()
    return rt.stats()


def test_a_deferred_cut_that_misses_tells_a_new_call_from_a_value_not_stored(
    tmp_path: Path,
) -> None:
    images = write_images(tmp_path / "images", n=4)
    folder = tmp_path / "cache"
    assert _run_once(folder, PlainFiles(images))["misses"] == {"new": 4}
    # a changed argument after the source: the store never saw the cut's input
    assert _run_once(folder, Blurred(images))["misses"] == {"new": 4}
    # the values gone (evicted), their headers kept: seen, but not stored
    for tier in runtime(folder).store.tiers:
        with tier._env() as env, env.begin(write=True) as txn:
            for name in (b"info", b"data"):
                db = tier._dbs[name]
                for key in [bytes(k) for k, _ in txn.cursor(db=db)]:
                    txn.delete(key, db=db)
    stats = _run_once(folder, PlainFiles(images))
    assert stats["misses"] == {"not_stored": 4} and stats["hits"] == 0
    assert _run_once(folder, PlainFiles(images))["hits"] == 4

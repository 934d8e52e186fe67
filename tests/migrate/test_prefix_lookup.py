"""Element-wise runs on uint8 arrays, gathered through tables: bit for bit what NumPy computes,
only where the probe proves it, computed when anything else needs them, used where they pay."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from prefix_support import CALLER, FileDataset, StubChain, StubSession, epoch, equal, write_images

import codedag.migrate.tables.lookup as lookup
from codedag.migrate.cache.prefix_values import Lineage, PrefixValue
from codedag.migrate.cache.runtime import CacheSettings, PrefixCacheRuntime
from codedag.migrate.cache.session import ChainSpec
from codedag.store.meta import meta_of
from codedag.store.tiers import StoreSettings

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


@pytest.fixture(autouse=True)
def _no_tables() -> Iterator[None]:
    lookup.reset()
    yield
    lookup.reset()


def _source(array: np.ndarray, session: Any = None, chain: Any = None) -> PrefixValue:
    lineage = Lineage(chain or StubChain(), session or StubSession())
    return PrefixValue(lineage, b"src", meta_of(array), array)


def _image(shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Every value 0..255 where the shape holds 256 elements, then random ones."""
    size = int(np.prod(shape))
    values = np.random.default_rng(seed).integers(0, 256, size, dtype=np.uint8)
    values[: min(size, 256)] = np.arange(min(size, 256), dtype=np.uint8)
    return values.reshape(shape)


RUNS: dict[str, Callable[[Any], Any]] = {
    "normalize to float32 per channel": lambda x: (x.astype(np.float32) / 255.0 - MEAN) / STD,
    "a weak scalar makes float64": lambda x: x / 255.0,
    "uint8 wraps around": lambda x: x * 3 + 7,
    "reflected operators": lambda x: 255 - x,
    "negation and abs on int16": lambda x: abs(-x.astype(np.int16)),
    "ufuncs": lambda x: np.sqrt(np.multiply(x, np.float32(0.5))),
    "rounding": lambda x: np.rint(np.floor(np.divide(x, 3.0)) * 1.5),
    "floats cast to integers in range": lambda x: (x.astype(np.float32) * 0.5).astype(np.int16),
    "a (1, 1, 3) constant in float64": lambda x: x.astype(np.float64) - MEAN.reshape(1, 1, 3),
    "a list constant": lambda x: x.astype(np.float32) - [1.0, 2.0, 3.0],
    "square and unary plus": lambda x: +np.square(x.astype(np.float32) - 128),
    # every loop of NumPy agrees on these here (codedag.backends.exact_tables checks it)
    "an exponential": lambda x: np.exp(x.astype(np.float32) / 255),
    "minimum with signed zeros": lambda x: np.minimum(x.astype(np.float32) - 1, 0.0),
}
CHECKED = {"an exponential": "exp", "minimum with signed zeros": "minimum"}
"""Runs whose exactness depends on NumPy's loops on this machine (float32 results)."""
PER_CHANNEL = {  # constants of 3 values: arrays of 3 channels only
    "normalize to float32 per channel",
    "a (1, 1, 3) constant in float64",
    "a list constant",
}
SHAPES = [(300,), (17, 19), (16, 17, 1), (16, 17, 3), (9, 10, 4), (3, 5, 7, 3)]


@pytest.mark.parametrize(
    ("name", "shape"),
    [(n, s) for n in RUNS for s in SHAPES if n not in PER_CHANNEL or s[-1] == 3],
    ids=str,
)
def test_a_table_gathers_what_numpy_computes_bit_for_bit(name: str, shape: tuple) -> None:
    from codedag.backends.exact_tables import loops_agree

    if name in CHECKED and not loops_agree(CHECKED[name], np.dtype(np.float32)):
        pytest.skip(f"NumPy's loops of {CHECKED[name]} disagree on this machine: no table")
    array = _image(shape)
    expected = RUNS[name](array)
    value = RUNS[name](_source(array))
    assert isinstance(value, PrefixValue) and value._lookup is not None, "not a run"
    assert not value._done and value.shape == expected.shape and value.dtype == expected.dtype
    table, root = value._lookup
    gathered = lookup.gather(table, root)
    assert gathered.dtype == expected.dtype and gathered.flags.c_contiguous
    assert lookup.same_bits(expected, gathered)
    assert lookup.same_bits(np.asarray(value), expected)  # on trial: computed by the calls


def _not_a_run(value: Any) -> bool:
    return isinstance(value, PrefixValue) and value._done and value._lookup is None


def test_what_the_probe_cannot_prove_is_computed_as_written() -> None:
    image = _image((16, 17, 3)) | 1  # no zeros: NumPy itself would not warn
    as_float = lambda x: x.astype(np.float32)  # noqa: E731
    cases: dict[str, Callable[[Any], Any]] = {
        "a division by zero on the probe": lambda x: 1.0 / as_float(x),
        "a constant that is not finite": lambda x: as_float(x) * np.float32(np.inf),
        "overflow": lambda x: as_float(x) * np.float32(3e38),
        "a constant varying along the first axis": lambda x: as_float(x) * np.ones((16, 1, 1)),
        "a full-size constant": lambda x: as_float(x) * np.ones(x.shape, np.float32),
        "a cast out of the target's range": lambda x: (as_float(x) * 300).astype(np.int8),
        "a cast that returns its input": lambda x: x.astype(np.uint8, copy=False),
    }
    for name, run in cases.items():
        with np.errstate(all="ignore"):
            expected = run(image)
            value = run(_source(image))
        assert _not_a_run(value), name
        assert lookup.same_bits(value._value, expected) or (
            value._value.dtype == expected.dtype and np.array_equal(value._value, expected)
        ), name
    five_channels = _image((4, 4, 5))
    value = _source(five_channels).astype(np.float32) - np.arange(5, dtype=np.float32)
    assert _not_a_run(value)  # more channels than a table takes
    strided = np.ascontiguousarray(image)[:, ::2]
    assert _not_a_run(_source(strided) * 2)  # not C-contiguous: NumPy keeps its strides
    assert _not_a_run(_source(image.astype(np.int16)) * 2)  # not uint8


def test_a_run_is_computed_before_anything_else_touches_its_chain() -> None:
    image = _image((16, 17, 3))
    source = _source(image)
    scaled = source.astype(np.float32) / 255.0
    assert not scaled._done and source._lineage.pending
    chw = scaled.transpose(2, 0, 1)  # not element-wise: the run is computed first
    assert chw._done and scaled._done and not source._lineage.pending
    assert np.array_equal(chw._value, (image.astype(np.float32) / 255.0).transpose(2, 0, 1))
    # a write into the array a run starts from comes after the run is computed
    source = _source(image.copy())
    doubled = source * 2
    source[0, 0, 0] = 100  # a use outside the chain: it diverges, the run is computed first
    assert lookup.same_bits(np.asarray(doubled), image * 2)


def test_a_run_ends_at_the_cut_and_dropped_intermediates_are_freed() -> None:
    image = _image((16, 17, 3))
    session = StubSession()
    source = _source(image, session, StubChain(cut_function="operator.truediv", cut_occurrence=1))
    as_float = source.astype(np.float32)
    reference = weakref.ref(as_float)
    centered = (as_float / 255.0 - MEAN).__truediv__  # the second division is the cut
    del as_float
    gc.collect()
    assert reference() is not None  # a pending value holds its inputs until it is computed
    out = centered(STD)
    assert isinstance(out, np.ndarray) and len(session.cuts) == 1
    assert lookup.same_bits(out, (image.astype(np.float32) / 255.0 - MEAN) / STD)
    assert not source._lineage.pending
    gc.collect()
    assert reference() is None


def test_a_table_is_used_after_its_trials_only_where_it_matched_and_was_faster() -> None:
    probe = np.zeros((256, 1), np.float32)
    faster, slower = lookup.Table(b"a", probe), lookup.Table(b"b", probe)
    value = np.zeros(4, np.float32)
    for trial in range(lookup.TRIALS):
        assert faster.use is None and slower.use is None, trial
        lookup._record(faster, value, value.copy(), calls_ns=400, table_ns=100, size=4)
        lookup._record(slower, value, value.copy(), calls_ns=100, table_ns=400, size=4)
    assert faster.use is True and slower.use is False
    differs = lookup.Table(b"c", probe)
    lookup._record(differs, value, value + 1, calls_ns=400, table_ns=100, size=4)
    assert differs.use is False and differs.mismatches == 1
    assert lookup.counts()["mismatches"] == 1


def test_a_table_that_differs_from_the_calls_is_never_used(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    image = _image((16, 17, 3))
    expected = (image.astype(np.float32) / 255.0 - MEAN) / STD
    real_gather = lookup.gather
    monkeypatch.setattr(lookup, "gather", lambda table, root: real_gather(table, root) + 1)
    for _ in range(lookup.TRIALS + 2):
        value = (_source(image).astype(np.float32) / 255.0 - MEAN) / STD
        assert lookup.same_bits(np.asarray(value), expected)
    assert lookup.counts() == {"gathered": 0, "computed": 5, "trials": 1, "mismatches": 1}


def test_without_opencv_the_calls_run_as_written(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(lookup, "_OPENCV", [None])
    image = _image((16, 17, 3))
    expected = (image.astype(np.float32) / 255.0 - MEAN) / STD
    for _ in range(lookup.TRIALS + 1):
        value = (_source(image).astype(np.float32) / 255.0 - MEAN) / STD
        assert lookup.same_bits(np.asarray(value), expected)
    assert lookup.counts()["gathered"] == 0 and lookup.counts()["trials"] == 0


def _trial_clock(calls_ns: int, table_ns: int) -> Any:
    """A clock for the tables' trials: each evaluation reads it three times (before the calls,
    after them, after the gather), so the calls take ``calls_ns`` and the gather ``table_ns``."""
    steps = iter([calls_ns, table_ns, 0] * 1000)
    now = [0]

    def perf_counter_ns() -> int:
        now[0] += next(steps)
        return now[0]

    return type("Clock", (), {"perf_counter_ns": staticmethod(perf_counter_ns)})


def test_on_a_large_image_the_table_is_chosen_and_gives_the_same_bits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # four NumPy passes over 2 MB against one cv2.LUT pass: about 5x apart on any machine; the
    # trials' clock says so, so a machine busy with other work cannot decide the choice
    monkeypatch.setattr(lookup, "time", _trial_clock(5_000_000, 1_000_000))
    image = _image((416, 416, 3))
    expected = (image.astype(np.float32) / 255.0 - MEAN) / STD
    for _ in range(lookup.TRIALS + 2):
        value = (_source(image).astype(np.float32) / 255.0 - MEAN) / STD
        assert lookup.same_bits(np.asarray(value), expected)
    assert lookup.counts()["gathered"] == 2 and lookup.counts()["trials"] == lookup.TRIALS


class NormalizedImages(FileDataset):
    """imread, resize, BGR->RGB, then normalize with operators and CHW: the whole output is the
    prefix, and its normalization is a run."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        image = cv2.resize(image, (96, 96), interpolation=cv2.INTER_AREA)
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        x = (image.astype(np.float32) / 255.0 - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1))), index


def test_a_cached_pipeline_gathers_its_normalization_and_every_epoch_is_identical(
    tmp_path: Path,
) -> None:
    paths = write_images(tmp_path / "images", n=12)
    dataset = NormalizedImages(paths)
    reference = epoch(dataset)
    caller = CALLER.replace("FileImages", "NormalizedImages").replace("prefix_support", __name__)
    spec = ChainSpec(
        "prefix0",
        "cv2.imread",
        "0",
        (caller,),
        ("cv2.cvtColor", "cv2.imread", "cv2.resize", "numpy.ascontiguousarray"),
        "numpy.ascontiguousarray",
        0,
    )
    store = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=64 << 20)
    rt = PrefixCacheRuntime([spec], CacheSettings(store=store, judge_after=0))
    rt.apply()
    try:
        first, second = epoch(dataset), epoch(dataset)
    finally:
        rt.restore()
    stats = rt.stats()
    assert equal(first, reference) and equal(second, reference)
    assert stats["misses"] == {"new": len(paths)} and stats["hits"] == len(paths)
    runs = stats["lookup"]
    assert runs["gathered"] + runs["computed"] == len(paths) and runs["mismatches"] == 0


class RefusedAfterNormalizing(NormalizedImages):
    """A pending run reaches ``memoryview``, which takes a buffer only and which no library of
    the chain guards (OpenCV's functions and ``torch.from_numpy`` are): it refuses it."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        image = cv2.resize(image, (96, 96), interpolation=cv2.INTER_AREA)
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        x = torch.from_numpy(
            np.asarray(memoryview((image.astype(np.float32) / 255.0 - MEAN) / STD))
        )
        return x.permute(2, 0, 1).contiguous(), index


def test_a_fetch_failing_with_a_pending_run_runs_again_without_the_cache(tmp_path: Path) -> None:
    paths = write_images(tmp_path / "images", n=8)
    dataset = RefusedAfterNormalizing(paths)
    reference = epoch(dataset)
    caller = CALLER.replace("FileImages", "RefusedAfterNormalizing").replace(
        "prefix_support", __name__
    )
    functions = ("cv2.cvtColor", "cv2.imread", "cv2.resize", "numpy.ascontiguousarray")
    spec = ChainSpec("prefix0", "cv2.imread", "0", (caller,), functions, functions[-1], 0)
    store = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=64 << 20)
    rt = PrefixCacheRuntime([spec], CacheSettings(store=store, judge_after=0))
    rt.apply()
    try:
        batches = epoch(dataset)
    finally:
        rt.restore()
    assert equal(batches, reference)
    assert rt.stats()["misses"].get("error", 0) >= 1  # the failed fetches, counted once each

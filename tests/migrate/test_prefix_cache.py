"""The prefix cache at run time: hits equal the computed values, provenance changes miss, workers
share one store, and a store that cannot be used degrades to no cache with one warning."""

from __future__ import annotations

import dataclasses
import logging
import os
import time
from pathlib import Path

import cv2
import lmdb
import numpy as np
import pytest
import torch
from prefix_support import FileImages, epoch, equal, runtime, write_images

import codedag.migrate.cache.keys as keys


@pytest.fixture
def images(tmp_path: Path) -> list[str]:
    return write_images(tmp_path / "images")


def _run(rt, dataset, epochs: int = 2, workers: int = 0):  # type: ignore[no-untyped-def]
    rt.apply()
    try:
        return [epoch(dataset, workers) for _ in range(epochs)]
    finally:
        rt.restore()


def test_the_second_epoch_hits_and_every_epoch_equals_the_uncached_run(
    tmp_path: Path, images: list[str]
) -> None:
    dataset = FileImages(images)
    reference = epoch(dataset)
    rt = runtime(tmp_path / "cache", verify=2)
    first, second = _run(rt, dataset)
    stats = rt.stats()
    assert equal(first, reference) and equal(second, reference)
    assert stats["misses"] == {"new": len(images)}
    assert stats["hits"] == len(images)
    assert stats["stored"] == len(images)
    assert stats["verify"] == {"checked": 2, "mismatches": 0, "examples": []}
    assert stats["bytes"]["ram"] > 0


def test_a_changed_file_argument_or_version_is_a_miss_never_a_stale_hit(
    tmp_path: Path, images: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    dataset = FileImages(images)
    _run(runtime(tmp_path / "cache"), dataset, epochs=1)
    # a file rewritten with other pixels (its mtime moves on)
    cv2.imwrite(images[0], np.full((48, 56, 3), 7, np.uint8))
    os.utime(images[0], ns=(time.time_ns() + 10**9, time.time_ns() + 10**9))
    rt = runtime(tmp_path / "cache")
    (changed,) = _run(rt, dataset, epochs=1)
    assert equal(changed, epoch(dataset))
    assert rt.stats()["misses"] == {"new": 1} and rt.stats()["hits"] == len(images) - 1
    # another argument of a call of the chain (the resize size)
    rt = runtime(tmp_path / "cache")
    (resized,) = _run(rt, FileImages(images, out=24), epochs=1)
    assert equal(resized, epoch(FileImages(images, out=24)))
    assert rt.stats()["misses"] == {"new": len(images)} and rt.stats()["hits"] == 0
    # another library version
    monkeypatch.setattr(keys, "_versions", b"opencv-python-headless=0.0.0")
    rt = runtime(tmp_path / "cache")
    _run(rt, dataset, epochs=1)
    assert rt.stats()["hits"] == 0


def test_a_use_outside_the_chain_computes_normally_and_counts_its_reason(
    tmp_path: Path, images: list[str]
) -> None:
    class Peeking(FileImages):
        def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
            image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
            image[0, 0] = 255  # a write into an intermediate value
            image = cv2.resize(image, (self.out, self.out), interpolation=cv2.INTER_AREA)
            return cv2.cvtColor(image, cv2.COLOR_BGR2RGB), index

    dataset = Peeking(images)
    rt = runtime(tmp_path / "cache")
    rt.chains[0] = rt.chains[0].__class__(
        **{
            **rt.chains[0].__dict__,
            "callers": (
                f"{__name__}.test_a_use_outside_the_chain_computes_normally_and_counts_its_reason"
                ".<locals>.Peeking.__getitem__",
            ),
        }
    )
    rt._sources = {"cv2.imread": rt.chains}
    first, second = _run(rt, dataset)
    assert equal(first, second)
    stats = rt.stats()
    assert stats["hits"] == 0 and stats["stored"] == 0
    assert stats["misses"] == {"diverged": 2 * len(images)}
    assert any("write" in reason for reason in stats["diverged"])


class Padded(FileImages):
    """Even images take the chain; odd ones skip the resize, and their value before the cut goes
    to ``cv2.copyMakeBorder``, a function outside the chain (cv2 ignores ``__array__``)."""

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        if index % 2 == 0:
            image = cv2.resize(image, (self.out, self.out), interpolation=cv2.INTER_AREA)
            image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        else:
            image = cv2.copyMakeBorder(image, 0, 0, 0, 0, cv2.BORDER_CONSTANT)[:32, :32]
        return torch.from_numpy(np.ascontiguousarray(image)), index


class Refused(FileImages):
    """Even images take the chain; odd ones hand their value before the cut to ``memoryview``,
    which takes a buffer only and which no library of the chain guards (OpenCV's functions and
    ``torch.from_numpy`` are guarded)."""

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        if index % 2 == 0:
            image = cv2.resize(image, (self.out, self.out), interpolation=cv2.INTER_AREA)
            image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
            return torch.from_numpy(np.ascontiguousarray(image)), index
        buffer = np.asarray(memoryview(image))
        return torch.from_numpy(buffer)[: self.out, : self.out].contiguous(), index


def _runtime_for(folder: Path, dataset: type, guards: tuple[str, ...]):  # type: ignore[no-untyped-def]
    rt = runtime(folder)
    caller = f"{__name__}.{dataset.__qualname__}.__getitem__"
    rt.chains[0] = dataclasses.replace(rt.chains[0], callers=(caller,), guards=guards)
    rt._sources = {"cv2.imread": rt.chains}
    return rt


def test_a_value_reaching_a_guarded_function_outside_the_chain_is_computed_there(
    tmp_path: Path, images: list[str]
) -> None:
    dataset = Padded(images)
    reference = epoch(dataset)
    rt = _runtime_for(tmp_path / "cache", Padded, guards=("cv2.copyMakeBorder",))
    first, second = _run(rt, dataset)
    assert equal(first, reference) and equal(second, reference)
    stats = rt.stats()
    half = len(images) // 2
    assert stats["hits"] == half and stats["misses"] == {"new": half, "diverged": 2 * half}
    assert stats["diverged"] == {"prefix0: a call outside the chain: cv2.copyMakeBorder": 2 * half}


def test_a_fetch_failing_with_many_values_of_a_chain_counts_once_toward_giving_it_up(
    tmp_path: Path, images: list[str], caplog: pytest.LogCaptureFixture
) -> None:
    dataset = Refused(images)
    reference = epoch(dataset)
    # torch.from_numpy refuses a value before the cut, the batch runs again without the cache
    rt = _runtime_for(tmp_path / "cache", Refused, guards=())
    with caplog.at_level(logging.WARNING):
        epochs = _run(rt, dataset, epochs=3)
    assert all(equal(batches, reference) for batches in epochs)
    stats = rt.stats()
    # each batch of 4 starts two chains (an even image stored, an odd one failing) and fails:
    # one failure of the chain each, so it is given up at the third failing fetch in a row, and
    # no later fetch looks anything up
    assert stats["misses"]["error"] == 3
    assert sum(r.count("keep failing") for r in caplog.messages) == 1
    assert stats["hits"] + sum(stats["misses"].values()) == 3 * 2


class Flipped(FileImages):
    """BGR to RGB by slicing (``[:, :, ::-1]``), as much YOLO-style code does, inside the chain."""

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)[:, :, ::-1]
        image = cv2.resize(image, (self.out, self.out), interpolation=cv2.INTER_AREA)
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        return torch.from_numpy(np.ascontiguousarray(image)), index


class Checked(FileImages):
    """A type check between the chain's calls, as helpers of image libraries make."""

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        if not isinstance(image, np.ndarray):
            raise TypeError(f"{self.paths[index]} is not an image")
        image = cv2.resize(image, (self.out, self.out), interpolation=cv2.INTER_AREA)
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        return torch.from_numpy(np.ascontiguousarray(image)), index


@pytest.mark.parametrize("written", [Flipped, Checked], ids=["slicing", "type check"])
def test_a_chain_that_slices_or_type_checks_its_value_is_cached(
    tmp_path: Path, images: list[str], written: type[FileImages]
) -> None:
    dataset = written(images)
    reference = epoch(dataset)
    rt = _runtime_for(tmp_path / "cache", written, guards=())
    first, second = _run(rt, dataset)
    assert equal(first, reference) and equal(second, reference)
    stats = rt.stats()
    assert stats["misses"] == {"new": len(images)} and stats["hits"] == len(images)


def test_a_value_tampered_with_in_the_store_is_caught_by_verify(
    tmp_path: Path, images: list[str]
) -> None:
    dataset = FileImages(images)
    rt = runtime(tmp_path / "cache")
    _run(rt, dataset, epochs=1)
    tier = rt.store.tiers[0]
    env = lmdb.open(str(tier.path), max_dbs=4)
    data = env.open_db(b"data")
    with env.begin(write=True) as txn:
        key, value = next(iter(txn.cursor(db=data)))
        txn.put(key, bytes(len(value)), db=data)  # same size, other bytes: the checksum fails
    env.close()
    rt = runtime(tmp_path / "cache", verify=len(images))
    (after,) = _run(rt, dataset, epochs=1)
    assert equal(after, epoch(dataset))
    stats = rt.stats()
    assert stats["corrupt"] == 1  # read back corrupt: removed, computed again
    assert stats["hits"] == len(images) - 1 and stats["verify"]["mismatches"] == 0


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_workers_0_2_and_4_share_one_store(tmp_path: Path, images: list[str]) -> None:
    dataset = FileImages(images)
    reference = epoch(dataset)
    folder = tmp_path / "cache"
    rt = runtime(folder)
    _run(rt, dataset, epochs=1, workers=0)
    assert rt.stats()["stored"] == len(images)
    for workers in (2, 4):
        rt = runtime(folder)
        (out,) = _run(rt, dataset, epochs=1, workers=workers)
        assert equal(out, reference)
        assert rt.stats()["hits"] == len(images), workers  # counted in the workers
        assert rt.stats()["misses"] == {}


def test_a_read_only_cache_folder_degrades_to_no_cache_with_one_warning(
    tmp_path: Path,
    images: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    def refuse(path: str, **_kwargs: object) -> None:
        raise lmdb.ReadonlyError(f"{path}: Read-only file system")

    monkeypatch.setattr(lmdb, "open", refuse)
    dataset = FileImages(images)
    rt = runtime(tmp_path / "cache")
    with caplog.at_level(logging.WARNING, logger="codedag.migrate.cache"):
        first, second = _run(rt, dataset)
    assert equal(first, epoch(dataset)) and equal(second, first)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "no usable store" in warnings[0].getMessage()
    assert "cannot be written" in warnings[0].getMessage()
    assert rt.stats()["hits"] == 0


def test_a_full_filesystem_degrades_to_no_cache_with_one_warning(
    tmp_path: Path,
    images: list[str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    from codedag.store import lmdb_tier

    original = lmdb_tier.LmdbTier.put_many

    def full(self: lmdb_tier.LmdbTier, *args: object, **kwargs: object) -> list[str]:
        raise self._failed(lmdb.DiskError("mdb_put: No space left on device"))

    monkeypatch.setattr(lmdb_tier.LmdbTier, "put_many", full)
    dataset = FileImages(images)
    rt = runtime(tmp_path / "cache", ram=0)  # the disk tier only
    with caplog.at_level(logging.WARNING, logger="codedag.store"):
        first, second = _run(rt, dataset)
    assert original is not lmdb_tier.LmdbTier.put_many
    assert equal(first, epoch(dataset)) and equal(second, first)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "filesystem is full" in warnings[0].getMessage()
    # nothing reached the store (a value still queued when the tier failed may have been hit
    # in its own process: it is the computed value)
    assert rt.stats()["stored"] == 0 and not rt.store.enabled


def test_a_chain_whose_storing_costs_more_than_computing_is_given_up_by_every_process(
    tmp_path: Path, images: list[str]
) -> None:
    from prefix_support import chain

    from codedag.migrate.cache.session import JUDGE_AFTER, Session

    rt = runtime(tmp_path / "cache")
    rt.store.begin_run()
    spec = chain()
    paying = Session(rt.store)
    other = chain("cv2.resize")
    for _ in range(JUDGE_AFTER - 1):  # measured: computing 5 ms, storing and reading 1 ms
        assert paying.judge(other, 5_000_000, 1_000_000) is None
    assert paying.judge(other, 5_000_000, 1_000_000) is True
    session = Session(rt.store)
    verdicts = [session.judge(spec, 1_000_000, 3_000_000) for _ in range(JUDGE_AFTER)]
    assert verdicts == [None] * (JUDGE_AFTER - 1) + [False]
    assert spec.id in session.given_up and session.values()["unpaid"] == 1
    # a later process (a DataLoader worker of the next epoch, a later run) reads the verdict
    later = runtime(tmp_path / "cache", judge_after=JUDGE_AFTER)
    (out,) = _run(later, FileImages(images), epochs=1)
    assert equal(out, epoch(FileImages(images)))
    stats = later.stats()
    assert stats["hits"] == 0 and stats["stored"] == 0 and stats["misses"] == {}
    rt.store.close()


def test_storing_is_judged_by_the_writers_cpu_time_not_by_its_waits(
    tmp_path: Path, images: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # LMDB lets one process write at a time: a writer waiting 50 ms for another worker's
    # transaction (or for a core) costs the loading nothing and must not give the chain up
    from codedag.migrate.cache import session as session_module
    from codedag.store import lmdb_tier

    judged: list[tuple[int, int]] = []
    original_judge = session_module.Session.judge
    original_put = lmdb_tier.LmdbTier.put_many

    def spy(self, chain, compute_ns, store_ns):  # type: ignore[no-untyped-def]
        judged.append((compute_ns, store_ns))
        return original_judge(self, chain, compute_ns, store_ns)

    def waiting_put(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        time.sleep(0.05)
        return original_put(self, *args, **kwargs)

    monkeypatch.setattr(session_module.Session, "judge", spy)
    monkeypatch.setattr(lmdb_tier.LmdbTier, "put_many", waiting_put)
    rt = runtime(tmp_path / "cache", judge_after=4)
    (out,) = _run(rt, FileImages(images), epochs=1)
    assert len(judged) == 4 and all(0 < s < 50_000_000 for _c, s in judged)
    assert equal(out, epoch(FileImages(images)))


def test_the_first_epoch_judges_a_chain_from_what_it_measured(
    tmp_path: Path, images: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from codedag.migrate.cache import session as session_module

    judged: list[tuple[int, int]] = []
    original = session_module.Session.judge

    def spy(self, chain, compute_ns, store_ns):  # type: ignore[no-untyped-def]
        judged.append((compute_ns, store_ns))
        return original(self, chain, compute_ns, store_ns)

    monkeypatch.setattr(session_module.Session, "judge", spy)
    rt = runtime(tmp_path / "cache", judge_after=4)
    _run(rt, FileImages(images), epochs=1)
    assert len(judged) == 4 and all(c > 0 and s > 0 for c, s in judged)


def test_what_keying_a_source_costs_counts_against_its_chain(
    tmp_path: Path, images: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hit pays its source's key as a miss does (a large array hashed at every sample would
    cost more than the calls it spares): the judge counts it with storing and reading back."""
    from codedag.migrate.cache import keys
    from codedag.migrate.cache import session as session_module

    judged: list[tuple[int, int]] = []
    original_judge = session_module.Session.judge
    original_key = keys.source_key

    def spy(self, chain, compute_ns, store_ns):  # type: ignore[no-untyped-def]
        judged.append((compute_ns, store_ns))
        return original_judge(self, chain, compute_ns, store_ns)

    def slow_key(*args):  # type: ignore[no-untyped-def]
        time.sleep(0.03)
        return original_key(*args)

    monkeypatch.setattr(session_module.Session, "judge", spy)
    monkeypatch.setattr(keys, "source_key", slow_key)
    rt = runtime(tmp_path / "cache", judge_after=4)
    (out,) = _run(rt, FileImages(images), epochs=1)
    assert len(judged) == 4 and all(s >= 30_000_000 > c for c, s in judged)
    assert "prefix0" in rt.session.given_up  # keying costs more than computing: given up
    assert equal(out, epoch(FileImages(images)))


class Jittered(FileImages):
    """The resize's factor drawn with Python's ``random`` (which the trace never sees): the cut's
    key changes every epoch, so no value stored is ever read back."""

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        import random

        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        factor = 0.5 + random.random() / 1000  # the same size, another argument every epoch
        image = cv2.resize(image, None, fx=factor, fy=factor, interpolation=cv2.INTER_AREA)
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        return torch.from_numpy(np.ascontiguousarray(image)), index


def test_a_chain_whose_cut_value_changes_every_epoch_is_given_up(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    import random

    from codedag.migrate.cache.session import UNFOUND_AFTER

    dataset = Jittered(write_images(tmp_path / "images", n=UNFOUND_AFTER + 4))

    def epochs(count: int) -> list:  # type: ignore[type-arg]
        out = []
        for seed in range(count):
            random.seed(seed)
            out.append(epoch(dataset))
        return out

    reference = epochs(3)
    rt = _runtime_for(tmp_path / "cache", Jittered, guards=())
    rt.apply()
    try:
        with caplog.at_level(logging.WARNING, logger="codedag.migrate.cache"):
            got = epochs(3)
    finally:
        rt.restore()
    assert all(equal(a, b) for a, b in zip(got, reference, strict=True))
    stats = rt.stats()
    assert stats["hits"] == 0 and stats["unpaid"] == 1
    # epoch 1 stores every value; epoch 2 finds none of them (another key after the source), and
    # after UNFOUND_AFTER the chain is given up: the rest of epoch 2 and epoch 3 compute without it
    assert stats["misses"] == {"new": len(dataset) + UNFOUND_AFTER}
    assert stats["stored"] == len(dataset) + UNFOUND_AFTER
    warnings = [
        r.getMessage() for r in caplog.records if "changes from epoch to epoch" in r.message
    ]
    assert len(warnings) == 1 and "prefix0" in warnings[0]


class ImageAndMask(FileImages):
    """Two reads by one function: the image, converted after its resize, and a mask."""

    def __getitem__(self, index: int):  # type: ignore[no-untyped-def]
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        mask = cv2.imread(self.paths[-1 - index], cv2.IMREAD_GRAYSCALE)
        image = cv2.cvtColor(cv2.resize(image, (32, 32)), cv2.COLOR_BGR2RGB)
        mask = cv2.resize(mask, (32, 32), interpolation=cv2.INTER_NEAREST)
        return torch.from_numpy(np.concatenate([image, mask[:, :, None]], 2)), index


def test_chains_of_one_caller_are_told_apart_by_the_line_of_their_source_call(
    tmp_path: Path, images: list[str]
) -> None:
    import inspect

    from codedag.migrate.cache.runtime import CacheSettings, PrefixCacheRuntime
    from codedag.migrate.cache.session import ChainSpec
    from codedag.store.tiers import StoreSettings

    source, first = inspect.getsourcelines(ImageAndMask.__getitem__)
    image_line, mask_line = (first + i for i, text in enumerate(source) if "cv2.imread(" in text)
    caller = f"{__name__}.{ImageAndMask.__qualname__}.__getitem__"
    # each chain has its own cut: taken for the other read, the mask's value would never reach
    # the image's cut (cv2.cvtColor) and the image's would be cut at its resize
    image = ChainSpec(
        "prefix0", "cv2.imread", "0", (caller,), ("cv2.cvtColor", "cv2.imread", "cv2.resize"),
        "cv2.cvtColor", 0, lines=(image_line,),
    )  # fmt: skip
    mask = ChainSpec(
        "prefix1", "cv2.imread", "0", (caller,), ("cv2.imread", "cv2.resize"),
        "cv2.resize", 0, lines=(mask_line,),
    )  # fmt: skip
    dataset = ImageAndMask(images)
    reference = epoch(dataset)
    store = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=64 << 20)
    rt = PrefixCacheRuntime([image, mask], CacheSettings(store=store, judge_after=0))
    first_epoch, second_epoch = _run(rt, dataset)
    assert equal(first_epoch, reference) and equal(second_epoch, reference)
    stats = rt.stats()
    assert stats["misses"] == {"new": 2 * len(images)}, stats["diverged"]
    assert stats["hits"] == 2 * len(images)


def test_a_chain_flagged_as_not_paying_by_another_process_is_unpaid_here(tmp_path: Path) -> None:
    # what a run with workers reads in its own process: the workers gave the chain up
    from codedag.migrate.cache import session as session_module

    first, second = runtime(tmp_path / "cache"), runtime(tmp_path / "cache")
    chain = first.chains[0]
    assert not first.session.unpaid(chain) and not second.session.unpaid(chain)
    first.session.store.set_flag(session_module._unpaid_flag(chain))
    assert second.session.unpaid(chain)
    assert not second.session.unpaid(dataclasses.replace(chain, cut_function="cv2.flip"))


def test_a_chains_unpaid_flag_is_the_same_in_every_process_and_run() -> None:
    """The flag was keyed by the chain's repr, whose set of methods prints in the order of the
    process's string hashing: a later run (or a spawned worker) never saw a chain an earlier
    one had given up, and paid for it again."""
    import subprocess
    import sys

    code = (
        "from codedag.migrate.cache.session import ChainSpec, _unpaid_flag\n"
        "chain = ChainSpec('prefix0', 'numpy.load', '0', ('m.D.__getitem__',), ('numpy.load',),"
        " 'numpy.load', 0, methods=frozenset({'permute', 'float', 'div_', 'flip', 'contiguous'}))\n"
        "print(_unpaid_flag(chain).hex())"
    )
    flags = {
        subprocess.run(
            [sys.executable, "-c", code],
            env={**os.environ, "PYTHONHASHSEED": str(seed)},
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        for seed in (1, 2, 3)
    }
    assert len(flags) == 1, flags


def test_processes_that_find_a_chain_unpaid_say_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # DataLoader workers judge their first values alike: the one that flags the chain says so
    first = runtime(tmp_path / "cache", judge_after=1)
    second = runtime(tmp_path / "cache", judge_after=1)
    chain = first.chains[0]
    with caplog.at_level("WARNING"):
        assert first.session.judge(chain, compute_ns=1_000, store_ns=5_000) is False
        assert second.session.judge(chain, compute_ns=1_000, store_ns=5_000) is False
    said = [r for r in caplog.records if "computing it does" in r.getMessage()]
    assert len(said) == 1
    assert first.session.counts["unpaid"] == second.session.counts["unpaid"] == 1


def test_processes_that_can_cache_no_sample_of_a_chain_say_so_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    # each DataLoader worker of each epoch meets the same unkeyable source: one warning, and
    # the processes that start after it skip the chain from their start
    from codedag.migrate.cache.session import NEVER_CACHED_AFTER

    first, second = runtime(tmp_path / "cache"), runtime(tmp_path / "cache")
    chain = first.chains[0]
    with caplog.at_level("WARNING"):
        for session in (first.session, second.session):
            for _ in range(NEVER_CACHED_AFTER):
                session.never_cached(chain, "a BufferedReader source has no stable identity")
            assert chain.id in session.given_up
    said = [r for r in caplog.records if "can be cached" in r.getMessage()]
    assert len(said) == 1
    assert runtime(tmp_path / "cache").session.unpaid(chain)  # a later worker skips it


def test_a_value_the_store_cannot_keep_is_named_in_words() -> None:
    from PIL import Image

    from codedag.migrate.cache.session import _described

    assert _described(Image.new("P", (2, 2))) == "a PIL image of mode P"
    assert _described({"a": 1}) == "a dict"
    assert _described(object()) == "an object"


def test_every_c_function_of_a_library_taking_arrays_only_is_guarded() -> None:
    from codedag.migrate.cache.runtime import library_guards

    guards = library_guards({"cv2.imread", "numpy.pad"})
    assert {"cv2.GaussianBlur", "cv2.flip", "cv2.warpAffine"} <= guards
    assert not any(name.startswith("numpy.") for name in guards)  # NumPy takes stand-ins
    assert "torch.from_numpy" in guards  # torch takes stand-ins, but not there
    assert library_guards({"numpy.pad", "torch.from_numpy"}) == {"torch.from_numpy"}

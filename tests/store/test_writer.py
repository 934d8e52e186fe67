"""The prefix cache's writer thread: queued values are read back before and after they are stored,
values queued without waking the thread wait for a wake or enough bytes, a full queue drops (counted) instead of blocking, a value written to before it is stored is never
stored, a process that exits or forks stores what it queued first, and flush returns once
every stored value is counted."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from codedag.migrate.cache.session import Session
from codedag.store import environments
from codedag.store.entry import decode, encode
from codedag.store.lmdb_tier import LmdbTier
from codedag.store.tiers import PrefixStore
from codedag.store.writer import WAKE_BYTES, Writer

MB = 1 << 20
SECRET = bytes(32)


def _store(folder: Path) -> PrefixStore:
    store = PrefixStore([LmdbTier("disk", folder / "store", 64 * MB)], folder)
    store.begin_run()
    return store


def _key(index: int) -> bytes:
    return index.to_bytes(16, "little")


class _Gate:
    """Holds every store write until opened (the writer thread waits in it)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.open = threading.Event()
        self.entered = threading.Event()
        original = LmdbTier.put_many

        def held(tier: LmdbTier, *args: object, **kwargs: object) -> list[str]:
            self.entered.set()
            assert self.open.wait(10)
            return original(tier, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(LmdbTier, "put_many", held)


def _held_writer(
    folder: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[PrefixStore, Writer, list[str], _Gate]:
    """A store, its writer, the outcomes it reports, and a gate holding its writes."""
    store = _store(folder)
    outcomes: list[str] = []
    writer = Writer(store, lambda _key, outcome, _ns: outcomes.append(outcome))
    return store, writer, outcomes, _Gate(monkeypatch)


def test_a_queued_value_is_read_back_before_and_after_it_is_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, writer, outcomes, gate = _held_writer(tmp_path, monkeypatch)
    value = np.arange(MB, dtype=np.uint8)
    encoded = encode(value, store.secret, _key(1))
    assert encoded is not None
    assert writer.submit(_key(1), encoded, [(_key(2), b'{"kind":"ndarray"}')])
    assert gate.entered.wait(10)
    assert store.get(_key(1)) is None  # not in the store yet, but queued here:
    queued = writer.pending(_key(1))
    assert queued is not None and np.array_equal(
        decode(queued.header, queued.data, store.secret, _key(1)), value
    )
    assert writer.pending_meta(_key(2)) == b'{"kind":"ndarray"}'
    assert writer.flush(timeout_s=0.05) is False  # held: the flush times out, never hangs
    gate.open.set()
    assert writer.flush()
    assert outcomes == ["stored"] and writer.queued == 0 and writer.pending(_key(1)) is None
    found = store.get(_key(1))
    assert found is not None and np.array_equal(found[0], value)
    writer.close()
    store.close()


def test_a_session_hits_a_value_still_queued(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    session = Session(store)
    gate = _Gate(monkeypatch)
    value = np.full(1000, 3, np.uint8)
    encoded = encode(value, store.secret, _key(1))
    assert encoded is not None
    assert session.writer.submit(_key(1), encoded, ())
    assert gate.entered.wait(10)
    found = session._lookup(_key(1))
    assert found is not None and found[1] is None and np.array_equal(found[0], value)
    found[0][...] = 0  # a private copy: the queued value is untouched
    gate.open.set()
    session.writer.close()
    assert session.values()["stored"] == 1
    store.close()


def test_values_queued_without_waking_wait_for_wake_or_enough_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    writer = Writer(store, lambda _key, _outcome, _ns: None)
    gate = _Gate(monkeypatch)
    gate.open.set()
    small = encode(np.full(1000, 1, np.uint8), store.secret, _key(0))
    assert small is not None and writer.submit(_key(0), small, ())  # starts the thread
    assert writer.flush()
    deadline = time.monotonic() + 10
    while not writer.asleep and time.monotonic() < deadline:  # it reports, then waits
        time.sleep(0.001)
    gate.entered.clear()
    small = encode(np.full(1000, 1, np.uint8), store.secret, _key(1))
    assert small is not None and writer.submit(_key(1), small, (), wake=False)
    assert not gate.entered.wait(0.3)  # queued, the thread not woken: still read back here
    assert writer.queued == 1 and writer.pending(_key(1)) is not None
    writer.wake()
    assert gate.entered.wait(10)
    assert writer.flush() and store.get(_key(1)) is not None
    gate.entered.clear()
    large = encode(np.full(WAKE_BYTES, 2, np.uint8), store.secret, _key(2))
    assert large is not None and writer.submit(_key(2), large, (), wake=False)
    assert gate.entered.wait(10)  # enough bytes queued: woken without wake()
    writer.close()
    assert store.get(_key(2)) is not None
    store.close()


def test_a_full_queue_drops_a_value_after_waiting_instead_of_blocking(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    writer = Writer(store, lambda _key, _outcome, _ns: None, queue_bytes=3 * MB, wait_s=0.05)
    gate = _Gate(monkeypatch)
    values = [encode(np.full(MB, i, np.uint8), store.secret, _key(i)) for i in range(3)]
    assert writer.submit(_key(0), values[0], ())  # type: ignore[arg-type]
    assert gate.entered.wait(10)  # the thread holds value 0
    assert writer.submit(_key(1), values[1], ())  # type: ignore[arg-type]
    started = time.perf_counter()
    assert not writer.submit(_key(2), values[2], ())  # type: ignore[arg-type]
    assert time.perf_counter() - started < 5
    gate.open.set()
    writer.close()
    assert store.get(_key(1)) is not None and store.get(_key(2)) is None
    store.close()


def test_a_value_written_to_before_it_is_stored_is_not_stored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, writer, outcomes, gate = _held_writer(tmp_path, monkeypatch)
    value = np.zeros(MB, np.uint8)
    encoded = encode(value, store.secret, _key(1))
    assert encoded is not None
    assert writer.submit(_key(1), encoded, ())
    assert gate.entered.wait(10)
    value[123] = 1  # user code writes into the value it received
    assert writer.pending(_key(1)) is not None
    gate.open.set()
    writer.close()
    assert outcomes == ["changed"]
    assert store.get(_key(1)) is None
    store.close()


def _child_stores(folder: str, count: int) -> None:
    store = PrefixStore([LmdbTier("disk", Path(folder) / "store", 64 * MB)], Path(folder))
    store.begin_run()
    writer = Writer(store, lambda _key, _outcome, _ns: None)
    original = LmdbTier.put_many

    def slow(tier: LmdbTier, *args: object, **kwargs: object) -> list[str]:
        time.sleep(0.05)  # the process reaches its exit with values still queued
        return original(tier, *args, **kwargs)  # type: ignore[arg-type]

    LmdbTier.put_many = slow  # type: ignore[method-assign]
    for i in range(count):
        assert writer.submit(_key(i), encode(np.full(1000, i, np.uint8), store.secret, _key(i)), ())  # type: ignore[arg-type]
    assert writer.queued > 0


def test_a_process_that_exits_stores_what_it_queued_first(tmp_path: Path) -> None:
    child = multiprocessing.get_context("fork").Process(
        target=_child_stores, args=(str(tmp_path), 8)
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0
    store = PrefixStore([LmdbTier("disk", tmp_path / "store", 64 * MB)], tmp_path)
    for i in range(8):
        found = store.get(_key(i))
        assert found is not None and found[0][0] == i
    store.close()


def test_a_fork_stores_what_is_queued_before_the_child_starts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store(tmp_path)
    writer = Writer(store, lambda _key, _outcome, _ns: None)
    original = LmdbTier.put_many

    def slow(tier: LmdbTier, *args: object, **kwargs: object) -> list[str]:
        time.sleep(0.02)
        return original(tier, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(LmdbTier, "put_many", slow)
    for i in range(6):
        assert writer.submit(_key(i), encode(np.full(1000, i, np.uint8), store.secret, _key(i)), ())  # type: ignore[arg-type]
    pid = os.fork()
    if pid == 0:  # the child finds every value in the store, and its own queue empty
        code = 0 if writer.queued == 0 and all(store.get(_key(i)) for i in range(6)) else 3
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert writer.submit(_key(9), encode(np.ones(10, np.uint8), store.secret, _key(9)), ())  # type: ignore[arg-type]
    writer.close()  # the thread goes on after the fork
    assert store.get(_key(9)) is not None
    store.close()
    assert environments._FORK_AWARE  # the writer is told of forks


def test_only_values_user_code_may_still_write_to_are_checked_when_stored() -> None:
    from PIL import Image

    array = np.zeros((4, 6), np.uint8)
    assert not encode(array, SECRET, b"k").owned  # type: ignore[union-attr]  # the caller's own buffer
    assert encode(array[:, ::2], SECRET, b"k").owned  # type: ignore[union-attr]  # made contiguous: a copy
    assert encode(Image.fromarray(array), SECRET, b"k").owned  # type: ignore[union-attr]
    import torch

    assert not encode(torch.zeros(3), SECRET, b"k").owned  # type: ignore[union-attr]


def test_small_values_are_stored_together_and_a_large_one_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from codedag.store.writer import GROUP_BYTES, GROUP_VALUES

    store, writer, outcomes, gate = _held_writer(tmp_path, monkeypatch)
    groups: list[int] = []
    held = LmdbTier.put_many

    def counted(tier: LmdbTier, items: list[object]) -> list[str]:
        groups.append(len(items))
        return held(tier, items)  # type: ignore[arg-type]

    monkeypatch.setattr(LmdbTier, "put_many", counted)
    small = 50 << 10
    sizes = [small] * (GROUP_VALUES + 2) + [GROUP_BYTES] + [small] * 2
    assert writer.submit(_key(0), encode(np.zeros(small, np.uint8), store.secret, _key(0)), ())  # type: ignore[arg-type]
    assert gate.entered.wait(10)  # the thread holds the first value: the others queue
    for i, size in enumerate(sizes, start=1):
        assert writer.submit(_key(i), encode(np.full(size, i, np.uint8), store.secret, _key(i)), ())  # type: ignore[arg-type]
    gate.open.set()
    assert writer.flush()
    assert groups == [1, GROUP_VALUES, 2, 1, 2]
    assert outcomes == ["stored"] * (len(sizes) + 1)
    for i, size in enumerate(sizes, start=1):
        found = store.get(_key(i))
        assert found is not None and found[0].size == size and found[0][0] == i % 256
    writer.close()
    store.close()


def test_flush_returns_after_every_stored_value_is_counted(tmp_path: Path) -> None:
    store = _store(tmp_path)
    reported: list[str] = []
    reporting = threading.Event()

    def slow_report(_key: bytes, outcome: str, _ns: int) -> None:
        reporting.set()
        time.sleep(0.02)  # a report that reads the value back takes a while
        reported.append(outcome)

    writer = Writer(store, slow_report)
    values = [np.full((64, 64), i, np.uint8) for i in range(3)]
    for i, value in enumerate(values):
        assert writer.submit(_key(i), encode(value, store.secret, _key(i)), ())
    assert writer.flush(timeout_s=10)
    assert reporting.is_set()
    assert reported == ["stored"] * 3  # counted before flush returned, not after
    writer.close()

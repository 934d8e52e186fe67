"""RAM tiers of deleted cache folders: removed when a run starts, unless a process holds them."""

from __future__ import annotations

import fcntl
import multiprocessing
import os
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from codedag.store import ram_owner
from codedag.store.tiers import PrefixStore, StoreSettings, ram_folder

UID = 4242
FILES = frozenset({"data.mdb", "lock.mdb", "format", ram_owner.OWNER_FILE, ram_owner.KEY_FILE})


def _tier(shm: Path, tag: str, owner: Path | None) -> Path:
    ram = shm / f"{ram_owner.PREFIX}{UID}-{tag}"
    ram.mkdir(parents=True)
    (ram / "data.mdb").write_bytes(b"x" * 8192)
    if owner is not None:
        (ram / ram_owner.OWNER_FILE).write_text(str(owner), encoding="utf-8")
    return ram


def test_only_tiers_whose_owner_folder_is_gone_are_removed(tmp_path: Path) -> None:
    shm, kept_folder = tmp_path / "shm", tmp_path / "cache-kept"
    kept_folder.mkdir()
    orphan = _tier(shm, "a", tmp_path / "deleted")
    kept = _tier(shm, "b", kept_folder)
    unknown = _tier(shm, "c", None)  # no owner recorded: cannot tell
    other_user = shm / f"{ram_owner.PREFIX}{UID + 1}-d"
    shutil.copytree(orphan, other_user)
    freed = ram_owner.sweep(shm, UID)
    assert not orphan.exists() and freed >= 8192
    assert kept.exists() and unknown.exists() and other_user.exists()
    assert ram_owner.sweep(shm, UID) == 0


def test_a_tier_a_process_still_holds_is_kept(tmp_path: Path) -> None:
    shm = tmp_path / "shm"
    held = _tier(shm, "a", tmp_path / "deleted")
    descriptor = os.open(held / ram_owner.OWNER_FILE, os.O_RDONLY)
    fcntl.flock(descriptor, fcntl.LOCK_SH)  # as a running process's claim holds it
    try:
        assert ram_owner.sweep(shm, UID) == 0 and held.exists()
    finally:
        os.close(descriptor)
    assert ram_owner.sweep(shm, UID) > 0 and not held.exists()


@pytest.mark.skipif(ram_folder(Path("/")) is None, reason="no shared memory folder")
def test_a_run_removes_the_ram_tier_of_a_deleted_cache_folder(tmp_path: Path) -> None:
    def run(folder: Path) -> PrefixStore:
        store = PrefixStore.open(StoreSettings(folder=folder, ram_budget_bytes=8 << 20))
        store.begin_run()
        assert store.put(folder.name.encode(), np.arange(1000), []) in ("stored", "exists")
        return store

    gone, live = tmp_path / "gone", tmp_path / "live"
    first = run(gone)
    ram = ram_folder(gone)
    assert ram is not None and (ram / ram_owner.OWNER_FILE).read_text() == str(gone)
    shutil.rmtree(gone)
    second = run(live)
    assert ram.exists()  # the first store is still open: its process holds the tier
    second.close()
    first.close()
    third = run(live)  # the first store closed: nothing holds its tier, whose folder is gone
    try:
        assert not ram.exists()
        assert third.get(b"live") is not None  # the live folder's own tier was kept
    finally:
        third.clear()


def test_an_owner_file_that_is_a_link_is_not_written_through(tmp_path: Path) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    ram = tmp_path / "shm" / f"{ram_owner.PREFIX}{UID}-e"
    ram.mkdir(parents=True)
    (ram / ram_owner.OWNER_FILE).symlink_to(victim)
    ram_owner.claim(ram, tmp_path / "cache")
    try:
        assert victim.read_text() == "keep me"
        assert ram not in ram_owner._HELD
    finally:
        ram_owner.release(ram)


@pytest.mark.skipif(ram_folder(Path("/")) is None, reason="no shared memory folder")
def test_a_cache_folder_made_again_does_not_inherit_its_ram_tier(tmp_path: Path) -> None:
    """The folder is deleted and made again under the same path: a new secret key, while the RAM
    tier of its earlier life stays in shared memory. The new run must store and read its own
    values, not find the earlier ones (which never verify) in its way."""
    folder = tmp_path / "cache"
    settings = StoreSettings(folder=folder, ram_budget_bytes=8 << 20, disk_budget_bytes=0)
    first = PrefixStore.open(settings)
    first.begin_run()
    assert first.put(b"sample", np.arange(1000), []) == "stored"
    first.close()
    ram = ram_folder(folder)
    assert ram is not None and (ram / ram_owner.KEY_FILE).exists()
    shutil.rmtree(folder)
    second = PrefixStore.open(settings)
    second.begin_run()
    try:
        assert second.tiers[0].enabled
        assert second.get(b"sample") is None  # the earlier value is gone, not found corrupt
        assert second.corrupt == 0
        assert second.put(b"sample", np.arange(1000) + 1, []) == "stored"
        found = second.get(b"sample")
        assert found is not None and found[0][0] == 1
    finally:
        second.clear()


def test_a_tier_of_another_key_that_a_process_holds_is_not_used(tmp_path: Path) -> None:
    shm = tmp_path / "shm"
    ram = _tier(shm, "a", tmp_path / "cache")
    (ram / ram_owner.KEY_FILE).write_text("another key", encoding="utf-8")
    descriptor = os.open(ram / ram_owner.OWNER_FILE, os.O_RDONLY)
    fcntl.flock(descriptor, fcntl.LOCK_SH)  # a process of the folder's earlier life
    try:
        assert not ram_owner.bind_key(ram, ram_owner.key_digest(b"k" * 32), FILES)
        assert ram.exists()
    finally:
        os.close(descriptor)
    digest = ram_owner.key_digest(b"k" * 32)
    assert ram_owner.bind_key(ram, digest, FILES) and not ram.exists()
    ram.mkdir()  # opened again: the digest is recorded, and kept on the next run
    assert ram_owner.bind_key(ram, digest, FILES)
    ram_owner.record_key(ram, digest)
    assert (ram / ram_owner.KEY_FILE).read_text() == digest
    (ram / "data.mdb").write_bytes(b"x" * 8192)
    assert ram_owner.bind_key(ram, digest, FILES) and (ram / "data.mdb").exists()
    assert ram_owner.key_digest(b"k" * 32) != ram_owner.key_digest(b"j" * 32)


def _open_and_share(folder: Path, name: str, delay_s: float, barrier: Any, found: Any) -> None:
    """One process of a machine's run: open the cache, store a value, read the other's."""
    store = PrefixStore.open(
        StoreSettings(folder=folder, ram_budget_bytes=8 << 20, disk_budget_bytes=0)
    )
    barrier.wait()
    time.sleep(delay_s)
    store.begin_run()
    stored = store.put(name.encode(), np.arange(1000), [])
    barrier.wait()  # both stored
    other = b"b" if name == "a" else b"a"
    found.put((name, stored, store.get(other) is not None, os.stat(store.tiers[0].path).st_ino))
    barrier.wait()  # neither closes before both have read
    store.close()


@pytest.mark.skipif(ram_folder(Path("/")) is None, reason="no shared memory folder")
def test_processes_opening_one_ram_tier_at_once_share_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ranks of one machine open its RAM tier at once. The second one must not take the
    tier the first has opened, but not yet recorded its key in, for one of an earlier key and
    remove it: each must read what the other stored."""
    record_key = ram_owner.record_key

    def record_late(ram: Path, digest: str) -> None:
        time.sleep(0.3)  # the window between opening the tier and recording its key, widened
        record_key(ram, digest)

    monkeypatch.setattr(ram_owner, "record_key", record_late)
    context = multiprocessing.get_context("fork")
    for round_ in range(3):
        folder = tmp_path / f"cache{round_}"
        barrier, found = context.Barrier(2), context.Queue()
        processes = [
            context.Process(target=_open_and_share, args=(folder, name, delay, barrier, found))
            for name, delay in (("a", 0.0), ("b", 0.1))
        ]
        for process in processes:
            process.start()
        try:
            seen = sorted(found.get(timeout=30) for _ in processes)
        finally:
            for process in processes:
                process.join(30)
        try:
            assert [s[:3] for s in seen] == [("a", "stored", True), ("b", "stored", True)]
            assert seen[0][3] == seen[1][3]  # one tier, not one removed under the other
            assert all(p.exitcode == 0 for p in processes)
        finally:
            store = PrefixStore.open(StoreSettings(folder=folder, ram_budget_bytes=8 << 20))
            store.begin_run()
            store.clear()

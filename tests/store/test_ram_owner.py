"""RAM tiers of deleted cache folders: removed when a run starts, unless a process holds them."""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path

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

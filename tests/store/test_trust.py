"""The prefix cache's files as a trust boundary: private folders and files, no other user's folder
and no link used, values authenticated by a secret key, a store file cut short never mapped."""

from __future__ import annotations

import logging
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from codedag.store import trust
from codedag.store.tiers import PrefixStore, StoreSettings, ram_folder

MB = 1 << 20
NOBODY = 65534
needs_shm = pytest.mark.skipif(ram_folder(Path("/")) is None, reason="no shared memory folder")
needs_root = pytest.mark.skipif(
    not hasattr(os, "getuid") or os.getuid() != 0, reason="another user's folder needs root"
)


def _store(folder: Path, ram: int = 8 * MB, disk: int = 8 * MB) -> PrefixStore:
    store = PrefixStore.open(StoreSettings(folder, ram_budget_bytes=ram, disk_budget_bytes=disk))
    store.begin_run()
    return store


@pytest.fixture
def cache(tmp_path: Path) -> Iterator[Path]:
    """A cache folder whose RAM tier, whatever a test left in it, is removed afterwards."""
    folder = tmp_path / "cache"
    yield folder
    ram = ram_folder(folder)
    if ram is None:
        return
    if ram.is_symlink():
        ram.unlink()
    shutil.rmtree(ram, ignore_errors=True)
    shutil.rmtree(ram.with_name(ram.name + "-target"), ignore_errors=True)


def _mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@needs_shm
def test_tier_folders_and_every_file_in_them_are_private(cache: Path) -> None:
    store = _store(cache)
    assert store.put(b"k" * 16, np.ones(1000, np.uint8), ()) == "stored"
    assert store.enabled and not store.problems
    for tier in store.tiers:
        files = sorted(tier.path.iterdir())
        assert {f.name for f in files} >= {"data.mdb", "lock.mdb"}
        assert _mode(tier.path) == 0o700, tier.kind
        assert all(_mode(f) == 0o600 for f in files), [(f.name, oct(_mode(f))) for f in files]
    ram = store.tiers[0].path
    assert (ram / "owner").exists() and _mode(ram / "owner") == 0o600
    assert _mode(cache / trust.SECRET_FILE) == 0o600
    store.clear()


def _foreign(path: Path) -> None:
    path.mkdir(mode=0o755)
    os.chown(path, NOBODY, NOBODY)


def _open_to_others(path: Path) -> None:
    path.mkdir(mode=0o700)
    os.chmod(path, 0o755)


def _link(path: Path) -> None:
    target = path.parent / (path.name + "-target")
    target.mkdir(mode=0o700)
    path.symlink_to(target)


@needs_shm
@pytest.mark.parametrize(
    ("make", "problem"),
    [
        pytest.param(_foreign, f"belongs to uid {NOBODY}", marks=needs_root),
        (_open_to_others, "has mode 0755: group or others may use it"),
        (_link, "is a link"),
    ],
    ids=["another-user", "open-to-others", "link"],
)
def test_a_ram_folder_made_first_by_someone_else_is_refused_and_the_disk_tier_goes_on(
    cache: Path, make, problem: str
) -> None:  # type: ignore[no-untyped-def]
    ram = ram_folder(cache)
    assert ram is not None
    make(ram)
    before = sorted(p.name for p in ram.iterdir())
    store = _store(cache)
    (refused,) = store.problems
    assert refused.startswith("ram tier: ") and problem in refused
    assert store.enabled and [t.kind for t in store.tiers if t.enabled] == ["disk"]
    assert store.put(b"k" * 16, np.ones(1000, np.uint8), ()) == "stored"
    found = store.get(b"k" * 16)
    assert found is not None and found[1].kind == "disk"
    store.close()
    assert sorted(p.name for p in ram.iterdir()) == before  # nothing written into it
    store.tiers[1].clear()


@needs_shm
@pytest.mark.parametrize("name", ["owner", "data.mdb", "lock.mdb"])
def test_a_link_inside_a_tier_folder_is_never_written_through(
    cache: Path, tmp_path: Path, name: str
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    ram = ram_folder(cache)
    assert ram is not None
    ram.mkdir(mode=0o700)
    (ram / name).symlink_to(victim)
    store = _store(cache)
    assert len(store.problems) == 1 and "is a link" in store.problems[0]
    assert store.put(b"k" * 16, np.ones(1000, np.uint8), ()) == "stored"  # in the disk tier
    store.close()
    assert victim.read_text() == "keep me" and (ram / name).is_symlink()


def test_a_refused_tier_is_one_warning_and_the_run_goes_on_without_the_cache(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from prefix_support import FileImages, epoch, equal, runtime, write_images

    disk = tmp_path / "cache" / "store"
    disk.mkdir(parents=True)
    os.chmod(disk, 0o770)
    dataset = FileImages(write_images(tmp_path / "images", n=4))
    rt = runtime(tmp_path / "cache", ram=0)
    with caplog.at_level(logging.WARNING, logger="codedag.migrate.cache"):
        rt.apply()
        try:
            out = [epoch(dataset) for _ in range(2)]
        finally:
            rt.restore()
    assert equal(out[0], epoch(dataset)) and equal(out[1], out[0])
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and "no usable store" in warnings[0], warnings
    assert "has mode 0770" in warnings[0]
    assert sorted(p.name for p in disk.iterdir()) == []


def _values(store: PrefixStore, keys: list[bytes], fill: int) -> None:
    for key in keys:
        assert store.put(key, np.full(1000, fill, np.uint8), ()) == "stored"


def test_a_swapped_store_file_with_matching_checksums_is_never_served(tmp_path: Path) -> None:
    keys = [bytes([i]) * 16 for i in range(16)]
    mine, theirs = _store(tmp_path / "mine", ram=0), _store(tmp_path / "theirs", ram=0)
    _values(mine, keys, 0)
    _values(theirs, keys, 66)  # the same keys, other values, correctly tagged by another key
    mine.close()
    theirs.close()
    os.replace(theirs.tiers[0].path / "data.mdb", mine.tiers[0].path / "data.mdb")
    again = _store(tmp_path / "mine", ram=0)
    assert [again.get(key) for key in keys] == [None] * len(keys)
    assert again.corrupt == len(keys)
    _values(again, keys, 1)  # the corrupt entries were removed: the keys are stored anew
    assert all(int(found[0][0]) == 1 for found in map(again.get, keys) if found is not None)
    again.close()


def test_a_value_moved_to_another_key_is_never_served(tmp_path: Path) -> None:
    import lmdb

    store = _store(tmp_path / "cache", ram=0)
    _values(store, [b"a" * 16], 7)
    store.close()
    env = lmdb.open(str(store.tiers[0].path), max_dbs=4)
    with env.begin(write=True) as txn:
        for name in (b"data", b"info"):
            db = env.open_db(name, txn=txn)
            txn.put(b"b" * 16, txn.get(b"a" * 16, db=db), db=db)
    env.close()
    again = _store(tmp_path / "cache", ram=0)
    assert again.get(b"a" * 16) is not None
    assert again.get(b"b" * 16) is None and again.corrupt == 1
    again.close()


def test_the_key_is_kept_private_and_read_back_by_the_next_run(tmp_path: Path) -> None:
    first = _store(tmp_path / "cache", ram=0)
    _values(first, [b"k" * 16], 3)
    first.close()
    key_file = tmp_path / "cache" / trust.SECRET_FILE
    assert _mode(key_file) == 0o600 and len(key_file.read_bytes()) == trust.SECRET_BYTES
    second = _store(tmp_path / "cache", ram=0)
    assert second.secret == first.secret and second.get(b"k" * 16) is not None
    second.close()


@pytest.mark.parametrize("how", ["link", "open-to-others", "short"])
def test_a_key_file_that_cannot_be_trusted_turns_the_cache_off(tmp_path: Path, how: str) -> None:
    folder = tmp_path / "cache"
    folder.mkdir()
    key_file = folder / trust.SECRET_FILE
    if how == "link":
        (tmp_path / "elsewhere").write_bytes(bytes(trust.SECRET_BYTES))
        key_file.symlink_to(tmp_path / "elsewhere")
    else:
        key_file.write_bytes(bytes(trust.SECRET_BYTES if how != "short" else 5))
        os.chmod(key_file, 0o644 if how == "open-to-others" else 0o600)
    store = _store(folder, ram=0)
    assert not store.enabled and "key file" in store.problems[0]
    assert store.put(b"k" * 16, np.ones(10, np.uint8), ()) == "off"


_REOPEN = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import numpy as np
    from codedag.store.tiers import PrefixStore, StoreSettings

    folder, ram = Path(sys.argv[1]), int(sys.argv[2])
    settings = StoreSettings(folder, ram_budget_bytes=ram, disk_budget_bytes=64 << 20)
    store = PrefixStore.open(settings)
    store.begin_run()
    hits = sum(store.get(i.to_bytes(16, "little")) is not None for i in range(48))
    assert store.put((99).to_bytes(16, "little"), np.ones(10), ()) == "stored"
    print(hits, [t.kind for t in store.tiers if t.enabled])
    store.close()
    """
)


@pytest.mark.parametrize("kind", ["ram", "disk"])
def test_a_store_file_cut_short_between_runs_is_removed_not_mapped(cache: Path, kind: str) -> None:
    if kind == "ram" and ram_folder(cache) is None:
        pytest.skip("no shared memory folder")
    ram = 64 * MB if kind == "ram" else 0
    store = PrefixStore.open(StoreSettings(cache, ram_budget_bytes=ram, disk_budget_bytes=64 * MB))
    store.begin_run()
    for i in range(48):
        value = np.full(100_000, i, np.uint8)
        assert store.put(i.to_bytes(16, "little"), value, ()) == "stored"
    tier = store.tiers[0]
    assert tier.kind == kind
    store.close()
    data = tier.path / "data.mdb"
    size_bytes = data.stat().st_size
    os.truncate(data, size_bytes * 3 // 4)
    assert "cut short" in trust.short_store(data)
    run = subprocess.run(
        [sys.executable, "-c", _REOPEN, str(cache), str(ram)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, (run.returncode, run.stderr[-2000:])  # -7: SIGBUS
    hits, kinds = run.stdout.split(" ", 1)
    assert kind in kinds  # the tier starts empty and is used
    assert int(hits) == 0  # every value was in the file removed
    assert run.stderr.count("cut short") == 1 and "removed and starts empty" in run.stderr
    assert trust.short_store(data) == ""


def test_a_whole_store_file_and_a_file_of_another_kind_are_not_cut_short(tmp_path: Path) -> None:
    store = _store(tmp_path / "cache", ram=0)
    _values(store, [bytes([i]) * 16 for i in range(8)], 1)
    store.close()
    data = store.tiers[0].path / "data.mdb"
    assert trust.short_store(data) == ""
    os.truncate(data, 4096 + 100)  # the second meta page cut
    assert "fewer than its two meta pages" in trust.short_store(data)
    other = tmp_path / "other.mdb"
    other.write_bytes(b"not an LMDB file" * 100)
    assert trust.short_store(other) == "" and trust.short_store(tmp_path / "none") == ""


def test_a_store_growing_while_it_is_checked_is_not_cut_short(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Another process commits between the check's reads: its file grows, then its meta pages
    # name the new pages. The check must not take the file for one cut short (and remove it).
    store = _store(tmp_path / "cache", ram=0)
    _values(store, [bytes([i]) * 16 for i in range(2)], 1)
    store.close()
    data = store.tiers[0].path / "data.mdb"
    before = data.read_bytes()
    store = _store(tmp_path / "cache", ram=0)
    for i in range(48):
        assert store.put(bytes([100 + i]) * 16, np.full(50_000, i, np.uint8), ()) == "stored"
    store.close()
    after = data.read_bytes()
    assert len(after) > len(before)
    data.write_bytes(before)
    real_pread = os.pread
    grown: list[bool] = []

    def pread_after_a_commit(descriptor: int, length: int, offset: int) -> bytes:
        if not grown:
            grown.append(True)
            data.write_bytes(after)  # the same file, grown with its metas by the commit
        return real_pread(descriptor, length, offset)

    monkeypatch.setattr(trust.os, "pread", pread_after_a_commit)
    assert trust.short_store(data) == ""
    assert grown

"""The prefix cache's store: budgets honoured with eviction, generations, crash safety."""

from __future__ import annotations

import functools
import os
import signal
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from codedag.devices.memory import allocated_bytes
from codedag.store.entry import Encoded, decode, encode
from codedag.store.lmdb_tier import LmdbTier

MB = 1 << 20
SECRET = bytes(range(32))


def _put(tier: LmdbTier, index: int, size: int = MB) -> str:
    key = index.to_bytes(4, "little")
    encoded = encode(np.full(size, index % 251, np.uint8), SECRET, key)
    assert encoded is not None
    return tier.put(key, encoded)


def _get(tier: LmdbTier, key: bytes) -> tuple[Any, bool] | None:
    return tier.get(key, functools.partial(decode, secret=SECRET, key=key))


def test_the_budget_is_honoured_with_eviction_of_older_runs(tmp_path: Path) -> None:
    tier = LmdbTier("ram", tmp_path / "env", 8 * MB)
    tier.begin_run()
    outcomes = [_put(tier, i, MB // 2) for i in range(20)]
    assert outcomes[:10] == ["stored"] * 10
    assert "full" in outcomes  # this run's entries are kept, not thrashed
    assert tier.info().used_bytes <= tier.limit_bytes
    assert allocated_bytes(tier.path / "data.mdb") <= tier.budget_bytes
    tier.begin_run()
    assert [_put(tier, 100 + i, MB // 2) for i in range(10)] == ["stored"] * 10  # older evicted
    info = tier.info()
    assert tier.evicted >= 9 and info.used_bytes <= tier.limit_bytes
    assert allocated_bytes(tier.path / "data.mdb") <= tier.budget_bytes
    assert _get(tier, (100).to_bytes(4, "little")) is not None
    assert _get(tier, (0).to_bytes(4, "little")) is None


def _encoded(value: np.ndarray, key: bytes = b"k") -> Encoded:
    encoded = encode(value, SECRET, key)
    assert encoded is not None
    return encoded


def _item(
    index: int, value: np.ndarray, metas: list[tuple[bytes, bytes]] | None = None
) -> tuple[bytes, Encoded, list[tuple[bytes, bytes]]]:
    key = index.to_bytes(4, "little")
    return key, _encoded(value, key), metas or []


def test_values_stored_together_each_get_their_own_outcome(tmp_path: Path) -> None:
    tier = LmdbTier("disk", tmp_path / "env", 8 * MB)
    tier.begin_run()
    assert _put(tier, 1, 1000) == "stored"
    written = np.zeros(1000, np.uint8)
    changed = _encoded(written, (3).to_bytes(4, "little"))
    written[7] = 1  # written to after it was encoded: never stored
    meta = (b"m" * 16, b'{"kind":"ndarray"}')
    items = [
        _item(2, np.full(1000, 2, np.uint8), [meta]),
        _item(1, np.full(1000, 1, np.uint8)),
        ((3).to_bytes(4, "little"), changed, []),
        _item(4, np.zeros(9 * MB, np.uint8)),
        _item(5, np.full(1000, 5, np.uint8)),
    ]
    assert tier.put_many(items) == ["stored", "exists", "changed", "full", "stored"]
    for index in (1, 2, 5):
        found = _get(tier, index.to_bytes(4, "little"))
        assert found is not None and int(found[0][0]) == index
    assert _get(tier, (3).to_bytes(4, "little")) is None
    assert tier.meta(meta[0]) is not None
    sizes = [items[i][1].nbytes for i in (0, 4)] + [
        _encoded(np.full(1000, 1, np.uint8), (1).to_bytes(4, "little")).nbytes
    ]
    assert tier.info().used_bytes == sum(sizes) + len(meta[0]) + len(meta[1]) + 12


def test_values_stored_together_evict_older_runs_for_the_ones_that_need_it(
    tmp_path: Path,
) -> None:
    tier = LmdbTier("ram", tmp_path / "env", 8 * MB)
    tier.begin_run()
    assert [_put(tier, i, MB // 2) for i in range(10)] == ["stored"] * 10
    tier.begin_run()
    items = [_item(100 + i, np.full(MB // 2, i, np.uint8)) for i in range(6)]
    assert tier.put_many(items) == ["stored"] * 6
    assert tier.evicted > 0 and tier.info().used_bytes <= tier.limit_bytes
    assert all(_get(tier, key) is not None for key, _e, _m in items)


def test_a_hit_moves_an_entry_to_the_current_run(tmp_path: Path) -> None:
    tier = LmdbTier("disk", tmp_path / "env", 8 * MB)
    tier.begin_run()
    _put(tier, 1)
    tier.begin_run()
    key = (1).to_bytes(4, "little")
    found = _get(tier, key)
    assert found is not None and found[1] is True  # stale: from an older run
    tier.touch([key], [])
    found = _get(tier, key)
    assert found is not None and found[1] is False


def test_a_writer_killed_mid_transaction_leaves_no_entry(tmp_path: Path) -> None:
    tier = LmdbTier("disk", tmp_path / "env", 16 * MB)
    tier.begin_run()
    _put(tier, 1)
    tier.close()
    pid = os.fork()
    if pid == 0:  # the child: a worker killed while its value is half written
        try:
            with tier._env() as env:
                txn = env.begin(write=True)
                encoded = encode(np.full(4 * MB, 9, np.uint8), SECRET, b"killed")
                assert encoded is not None
                txn.put(b"killed", encoded.data, db=tier._dbs[b"data"])
                os.kill(os.getpid(), signal.SIGKILL)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert _get(tier, b"killed") is None
    assert _get(tier, (1).to_bytes(4, "little")) is not None
    assert _put(tier, 2) == "stored"  # the write lock the child held is free again


def test_a_writer_killed_while_storing_values_together_leaves_none_of_them(
    tmp_path: Path,
) -> None:
    tier = LmdbTier("disk", tmp_path / "env", 16 * MB)
    tier.begin_run()
    tier.close()
    items = [_item(10 + i, np.full(MB // 4, i, np.uint8)) for i in range(4)]
    pid = os.fork()
    if pid == 0:  # the child: killed after writing two values of the four, before the commit
        try:
            add = LmdbTier._add
            written = []

            def killing(self: LmdbTier, *args: object) -> object:
                if len(written) == 2:
                    os.kill(os.getpid(), signal.SIGKILL)
                written.append(args[1])
                return add(self, *args)  # type: ignore[arg-type]

            LmdbTier._add = killing  # type: ignore[method-assign]
            tier.put_many(items)
        finally:
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    assert all(_get(tier, key) is None for key, _e, _m in items)
    assert tier.info().used_bytes == 0
    assert tier.put_many(items) == ["stored"] * 4  # the write lock is free again


@pytest.mark.parametrize("size", [0, 1, 1000])
def test_values_round_trip_bit_for_bit(tmp_path: Path, size: int) -> None:
    tier = LmdbTier("disk", tmp_path / "env", 4 * MB)
    tier.begin_run()
    value = np.arange(size, dtype=np.float32).reshape(-1, 1) / 3
    encoded = encode(value, SECRET, b"k")
    assert encoded is not None
    assert tier.put(b"k", encoded) == "stored"
    found = _get(tier, b"k")
    assert found is not None
    assert found[0].dtype == value.dtype and found[0].tobytes() == value.tobytes()
    found[0][...] = 1  # a private, writable copy


def test_argument_encodings_take_the_same_bytes_by_the_fast_path_and_the_general_one() -> None:
    import enum

    import codedag.migrate.cache.keys as keys

    class Color(enum.Enum):
        RED = 1

    arguments = [
        1, -2**70, 2.5, float("nan"), -0.0, "é'\"", True, None, (1, 2.0, (3, None)), [1, [2]],
        np.arange(6)[::2], np.float32, np.int64(3), np.dtype(">f4"), Color.RED, {"a": (1,)},
        b"xy", 1j,
    ]  # fmt: skip
    for argument in arguments:
        fast: list[bytes] = []
        general: list[bytes] = []
        keys.encode_argument(argument, fast)
        keys._encode_other(argument, general, 0)
        assert b"".join(fast) == b"".join(general), argument
    distinct = [(1,), (1.0,), (True,), [1], ("1",)]
    encoded = set()
    for argument in distinct:
        out: list[bytes] = []
        keys.encode_argument(argument, out)
        encoded.add(b"".join(out))
    assert len(encoded) == len(distinct)  # equal values of other types are other keys


def test_headers_are_the_json_of_their_fields_and_read_back() -> None:
    import json

    from codedag.store.meta import Meta, meta_of

    metas = [
        Meta("ndarray", (411, 416, 3), "|u1"),
        Meta("pil", (10, 20, 3), "", "RGB"),
        Meta("other", type_name='odd "name" \\ é'),
        Meta("tensor", (), "float32"),
    ]
    for meta in metas:
        fields: dict[str, object] = {"kind": meta.kind, "shape": list(meta.shape)}
        fields["dtype"] = meta.dtype
        if meta.mode:
            fields["mode"] = meta.mode
        if meta.type_name:
            fields["type"] = meta.type_name
        assert meta.to_bytes() == json.dumps(fields, separators=(",", ":")).encode()
        assert Meta.from_bytes(meta.to_bytes()) == meta
    little, big = np.zeros((2, 3), "<f4"), np.zeros((2, 3), ">f4")
    assert meta_of(little) == Meta("ndarray", (2, 3), "<f4") == meta_of(np.ones((2, 3), "<f4"))
    assert meta_of(big) != meta_of(little) and meta_of(big).dtype == ">f4"


def test_clearing_a_tier_removes_its_files_and_nothing_else(tmp_path: Path) -> None:
    tier = LmdbTier("disk", tmp_path / "store", 8 * MB)
    tier.begin_run()
    assert _put(tier, 1, MB // 2) == "stored"
    assert sorted(f.name for f in tier.own_files()) == ["data.mdb", "lock.mdb"]
    assert tier.clear() >= MB // 2
    assert not (tmp_path / "store").exists()
    assert tier.clear() == 0  # nothing left: nothing to do


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda p: (p / "thesis.tex").write_text("keep me"), "holds thesis.tex"),
        (lambda p: (p / "data.mdb").write_text("keep me"), "no LMDB store of codedag"),
        (lambda p: (p / "lock.mdb").symlink_to(p.parent / "victim"), "holds lock.mdb"),
    ],
)
def test_clearing_a_folder_that_is_no_tier_is_refused_and_removes_nothing(
    tmp_path: Path, make, problem: str
) -> None:
    from codedag.store.lmdb_tier import NotATier

    (tmp_path / "victim").write_text("keep me")
    folder = tmp_path / "store"
    folder.mkdir()
    make(folder)
    before = sorted(p.name for p in folder.iterdir())
    with pytest.raises(NotATier, match=problem) as info:
        LmdbTier("disk", folder, 8 * MB).clear()
    assert "nothing was removed" in str(info.value) and "\n" not in str(info.value)
    assert sorted(p.name for p in folder.iterdir()) == before
    assert (tmp_path / "victim").read_text() == "keep me"


def test_clearing_a_tier_whose_folder_is_a_link_is_refused(tmp_path: Path) -> None:
    from codedag.store.lmdb_tier import NotATier

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "data.mdb").write_text("keep me")
    (tmp_path / "store").symlink_to(elsewhere)
    with pytest.raises(NotATier, match="is a link"):
        LmdbTier("disk", tmp_path / "store", 8 * MB).clear()
    assert (elsewhere / "data.mdb").read_text() == "keep me"


def test_ranks_of_one_launch_share_a_run_and_never_evict_each_others_values(
    tmp_path: Path,
) -> None:
    path = tmp_path / "env"
    earlier = LmdbTier("ram", path, 8 * MB)
    earlier.begin_run()
    assert [_put(earlier, i, MB // 2) for i in range(6)] == ["stored"] * 6
    rank0, rank1 = LmdbTier("ram", path, 8 * MB), LmdbTier("ram", path, 8 * MB)
    assert rank0.begin_run("launch") == rank1.begin_run("launch") == earlier.generation + 1
    assert [_put(rank0, 100 + i, MB // 2) for i in range(6)] == ["stored"] * 6
    outcomes = [_put(rank1, 200 + i, MB // 2) for i in range(12)]
    assert outcomes[:3] == ["stored"] * 3 and "full" in outcomes  # the earlier run made room
    for index in range(100, 106):  # the other rank's values of this run stay, and are current
        found = _get(rank1, index.to_bytes(4, "little"))
        assert found is not None and found[1] is False, index
    assert _get(rank1, (0).to_bytes(4, "little")) is None
    assert rank0.begin_run("the next launch") == earlier.generation + 2
    assert rank1.begin_run() == rank0.begin_run() - 1  # without a launch, every run is new


def test_a_value_changed_before_it_is_stored_leaves_a_file_no_one_reads_as_cut_short(
    tmp_path: Path,
) -> None:
    """Putting a large value and deleting it in the same transaction leaves its overflow pages
    counted in the meta page but never written: the file is then shorter than its pages say,
    and the next process opening the tier removed it as cut short (the cache started empty in
    every worker of a pipeline that draws into the value after the cut)."""
    from codedag.store.trust import short_store

    tier = LmdbTier("ram", tmp_path / "env", 64 * MB)
    tier.begin_run()
    assert _put(tier, 1, 1000) == "stored"
    written = np.zeros(MB, np.uint8)
    changed = _encoded(written, (2).to_bytes(4, "little"))
    written[7] = 1  # drawn into by the sample after the cut, before the writer stored it
    items = [((2).to_bytes(4, "little"), changed, []), _item(3, np.full(1000, 3, np.uint8))]
    assert tier.put_many(items) == ["changed", "stored"]
    assert short_store(tier.path / "data.mdb") == ""
    assert _get(tier, (3).to_bytes(4, "little")) is not None
    assert _get(tier, (2).to_bytes(4, "little")) is None

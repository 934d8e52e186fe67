"""A flag given with a value is set in the transaction that stores it (or finds it stored), and
only then: a value refused (too large, written to since it was encoded) sets nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from codedag.store.entry import encode
from codedag.store.lmdb_tier import LmdbTier
from codedag.store.tiers import PrefixStore

MB = 1 << 20


def _store(folder: Path, budget: int = 8 * MB) -> PrefixStore:
    store = PrefixStore([LmdbTier("disk", folder / "store", budget)], folder)
    store.begin_run()
    return store


def _key(index: int) -> bytes:
    return index.to_bytes(16, "little")


def test_a_flag_is_set_with_a_stored_value_and_with_one_found_stored(tmp_path: Path) -> None:
    store = _store(tmp_path)
    value = np.arange(100, dtype=np.uint8)
    encoded = encode(value, store.secret, _key(1))
    assert encoded is not None
    assert store.put_many([(_key(1), encoded, ())], [b"a"]) == ["stored"]
    assert store.put_many([(_key(1), encoded, ())], [b"b"]) == ["exists"]
    assert store.flag(b"a") and store.flag(b"b")


def test_a_value_refused_sets_no_flag(tmp_path: Path) -> None:
    store = _store(tmp_path, budget=2 * MB)
    large = encode(np.zeros(4 * MB, np.uint8), store.secret, _key(1))
    changed_value = np.zeros(1000, np.uint8)
    changed = encode(changed_value, store.secret, _key(2))
    assert large is not None and changed is not None
    changed_value[0] = 1  # written to after it was encoded
    outcomes = store.put_many(
        [(_key(1), large, ()), (_key(2), changed, ())], [b"large", b"changed"]
    )
    assert outcomes == ["full", "changed"]
    assert not store.flag(b"large") and not store.flag(b"changed")

"""Patching groups of names apart from each other, with one reference scan for all of them."""

from __future__ import annotations

import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import codedag.patching as patching
from codedag.errors import MigrationError
from codedag.patching import Patcher


@pytest.fixture
def library() -> Iterator[types.ModuleType]:
    """A library of three functions and a user module that bound two of them at import."""
    lib = types.ModuleType("groups_lib")
    for name in ("a", "b", "c"):
        exec(f"def {name}(x):\n    return x", lib.__dict__)
    user = types.ModuleType("groups_user")
    user.a, user.b = lib.a, lib.b
    sys.modules[lib.__name__], sys.modules[user.__name__] = lib, user
    yield lib
    del sys.modules[lib.__name__], sys.modules[user.__name__]


def _doubling(_name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    return lambda x: 2 * original(x)


def test_each_group_all_or_none_and_one_scan_for_all(
    library: types.ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    scans: list[int] = []
    scan = patching.reference_sites
    monkeypatch.setattr(patching, "reference_sites", lambda t: scans.append(len(t)) or scan(t))
    user = sys.modules["groups_user"]
    patcher = Patcher("groups")
    failures = patcher.patch_groups(
        [
            ("a", ["groups_lib.a"], _doubling),
            ("b+missing", ["groups_lib.b", "groups_lib.missing"], _doubling),
            ("c", ["groups_lib.c"], _doubling),
        ]
    )
    assert list(failures) == ["b+missing"] and isinstance(failures["b+missing"], MigrationError)
    assert scans == [2]  # a and c, found in one pass over the modules
    assert (library.a(1), user.a(1), library.c(1)) == (2, 2, 2)
    assert (library.b(1), user.b(1)) == (1, 1)  # the failed group left nothing patched
    assert sorted(patcher.records()) == ["groups_lib.a", "groups_lib.c"]
    patcher.restore()
    assert (library.a(1), user.a(1), library.c(1)) == (1, 1, 1)


def test_an_error_not_named_undoes_every_group(library: types.ModuleType) -> None:
    def broken(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        if name.endswith(".c"):
            raise RuntimeError("factory failed")
        return _doubling(name, original)

    patcher = Patcher("groups")
    with pytest.raises(RuntimeError, match="factory failed"):
        patcher.patch_groups([("a", ["groups_lib.a"], broken), ("c", ["groups_lib.c"], broken)])
    assert library.a(1) == 1 and sys.modules["groups_user"].a(1) == 1
    assert patcher.records() == {}

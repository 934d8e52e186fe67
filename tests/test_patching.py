"""The patcher: identity-preserving apply/restore, reference rebinding, rollback, thread safety."""

from __future__ import annotations

import sys
import threading
import types

import pytest

from codedag.errors import MigrationError
from codedag.patching import Patcher, active_patches, original_of, resolve


@pytest.fixture
def fake_lib(monkeypatch: pytest.MonkeyPatch) -> types.ModuleType:
    """A library module ``fakelib`` with functions, a class and a user module binding them."""
    lib = types.ModuleType("fakelib")

    def resize(x: int) -> int:
        return x + 1

    def blur(x: int) -> int:
        return x * 2

    class Image:
        def rotate(self, angle: int) -> int:
            return angle

        @staticmethod
        def open(path: str) -> str:
            return path

    resize.__module__ = blur.__module__ = Image.__module__ = "fakelib"
    lib.resize, lib.blur, lib.Image, lib.CONSTANT = resize, blur, Image, 3
    user = types.ModuleType("userpipeline")
    user.resize = resize  # from fakelib import resize
    user.AUGS = {"resize": resize, "blur": blur}  # a dict of functions
    monkeypatch.setitem(sys.modules, "fakelib", lib)
    monkeypatch.setitem(sys.modules, "userpipeline", user)
    return lib


def test_patch_and_restore_every_site(fake_lib: types.ModuleType) -> None:
    user = sys.modules["userpipeline"]
    original = fake_lib.resize
    patcher = Patcher("test")
    record = patcher.patch("fakelib.resize", lambda orig: lambda x: orig(x) + 100)
    assert fake_lib.resize(1) == 102
    assert user.resize(1) == 102  # bound at import time elsewhere
    assert user.AUGS["resize"](1) == 102  # held in a dict
    assert user.AUGS["blur"] is fake_lib.blur  # untouched
    assert record.site_count == 3
    assert original_of(fake_lib.resize) is original
    assert active_patches() == ["test:fakelib.resize"]
    assert patcher.restore() == 1
    assert fake_lib.resize is original and user.resize is original
    assert user.AUGS["resize"] is original
    assert active_patches() == []


def test_apply_and_restore_are_idempotent(fake_lib: types.ModuleType) -> None:
    patcher = Patcher()
    first = patcher.patch("fakelib.resize", lambda orig: lambda x: -x)
    second = patcher.patch("fakelib.resize", lambda orig: lambda x: 0)
    assert first is second and fake_lib.resize(3) == -3
    assert patcher.restore() == 1
    assert patcher.restore() == 0
    assert fake_lib.resize(3) == 4


def test_methods_and_staticmethods(fake_lib: types.ModuleType) -> None:
    raw_static = fake_lib.Image.__dict__["open"]
    with Patcher() as patcher:
        patcher.patch("fakelib.Image.rotate", lambda orig: lambda self, a: orig(self, a) * 10)
        patcher.patch("fakelib.Image.open", lambda orig: lambda p: "patched:" + orig(p))
        assert fake_lib.Image().rotate(2) == 20
        assert fake_lib.Image.open("x") == "patched:x"
    assert fake_lib.Image().rotate(2) == 2
    assert fake_lib.Image.__dict__["open"] is raw_static


def test_failure_rolls_back_everything(fake_lib: types.ModuleType) -> None:
    original = fake_lib.resize
    patcher = Patcher()
    with pytest.raises(MigrationError, match="not callable"):
        patcher.patch_many(["fakelib.resize", "fakelib.CONSTANT"], lambda n, orig: orig)
    assert fake_lib.resize is original
    assert sys.modules["userpipeline"].resize is original
    assert patcher.records() == {}


def test_factory_error_propagates_unchanged(fake_lib: types.ModuleType) -> None:
    def broken(name: str, orig: object) -> object:
        raise RuntimeError("factory broke")

    with pytest.raises(RuntimeError, match="factory broke"):
        Patcher().patch_many(["fakelib.blur"], broken)
    assert fake_lib.blur(2) == 4


def test_refuses_double_patching_by_two_patchers(fake_lib: types.ModuleType) -> None:
    with Patcher() as first:
        first.patch("fakelib.resize", lambda orig: lambda x: x)
        with pytest.raises(MigrationError, match="already patched"):
            Patcher().patch("fakelib.resize", lambda orig: lambda x: x)


def test_c_type_attributes_are_refused_clearly() -> None:
    with pytest.raises(MigrationError, match="read-only"):
        Patcher().patch("builtins.int.bit_length", lambda orig: orig)


@pytest.mark.parametrize("name", ["resize", "nosuchmodule.func", "json.no_such_function"])
def test_resolve_errors_name_the_problem(name: str) -> None:
    with pytest.raises(MigrationError, match=name.split(".")[-1]):
        resolve(name)


def test_resolve_finds_longest_module_prefix() -> None:
    import json.decoder

    owner, attribute, value = resolve("json.decoder.JSONDecoder.decode")
    assert owner is json.decoder.JSONDecoder and attribute == "decode"
    assert value is json.decoder.JSONDecoder.__dict__["decode"]


def test_concurrent_patch_and_restore_leave_originals(fake_lib: types.ModuleType) -> None:
    original = fake_lib.resize
    patcher = Patcher()
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            for _ in range(10):
                patcher.patch("fakelib.resize", lambda orig: lambda x: 0)
                patcher.restore("fakelib.resize")
        except BaseException as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=worker) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert fake_lib.resize is original
    assert sys.modules["userpipeline"].resize is original

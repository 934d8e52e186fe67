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


FRESH_MODULE = """
from fakelib import resize, blur
import fakelib

TABLE = {"resize": resize, "blur": fakelib.blur}
NESTED = {"train": {"resize": resize}, "ops": [resize, blur]}
OPS = [resize, blur]


class Augment:
    op = staticmethod(resize)
    raw = resize


class Holder:
    def __init__(self):
        self.fn = resize
        self.ops = [blur]


HOLDER = Holder()


def build():
    return {"late": resize}


LATE = build()
"""


def test_restore_finds_references_bound_by_a_module_imported_while_patched(
    fake_lib: types.ModuleType, tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    folder = Path(str(tmp_path))
    (folder / "fresh_pipeline_mod.py").write_text(FRESH_MODULE)
    monkeypatch.syspath_prepend(str(folder))
    originals = {"resize": fake_lib.resize, "blur": fake_lib.blur}
    patcher = Patcher("test")
    patcher.patch_many(["fakelib.resize", "fakelib.blur"], lambda name, orig: lambda x: -1)
    try:
        import fresh_pipeline_mod as fresh  # type: ignore[import-not-found]

        assert fresh.resize(1) == -1 and fresh.TABLE["blur"](1) == -1  # bound the replacements
        assert fresh.Augment.op(1) == -1 and fresh.HOLDER.fn(1) == -1
    finally:
        assert patcher.restore() == 2
        monkeypatch.delitem(sys.modules, "fresh_pipeline_mod")
    resize, blur = originals["resize"], originals["blur"]
    assert fresh.resize is resize and fresh.blur is blur
    assert {"resize": resize, "blur": blur} == fresh.TABLE
    assert fresh.NESTED["train"]["resize"] is resize and fresh.NESTED["ops"] == [resize, blur]
    assert [resize, blur] == fresh.OPS
    assert fresh.Augment.__dict__["op"].__func__ is resize and fresh.Augment.raw is resize
    assert fresh.Augment.op(1) == 2
    assert fresh.HOLDER.fn is resize and fresh.HOLDER.ops == [blur]
    assert fresh.LATE["late"] is resize


@pytest.fixture
def sweeps(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many replacements each restore swept the modules for."""
    import codedag.patching as patching

    counts: list[int] = []
    sweep = patching.sweep_modules

    def counting(
        replacements: dict[int, tuple[object, object]], new: set[str], origins: set[str]
    ) -> int:
        counts.append(len(replacements))
        return sweep(replacements, new, origins)

    monkeypatch.setattr(patching, "sweep_modules", counting)
    return counts


def test_stable_references_sweep_only_replacements_bound_while_patched(
    fake_lib: types.ModuleType, sweeps: list[int]
) -> None:
    user = sys.modules["userpipeline"]
    resize, blur = fake_lib.resize, fake_lib.blur
    cache: dict[str, object] = {}  # a factory's cache: references that stay

    def factory(name: str, orig: object) -> object:
        return cache.setdefault(name, lambda x: -x)

    with Patcher("test", stable_references=True) as patcher:
        patcher.patch_many(["fakelib.resize", "fakelib.blur"], factory)
    assert sweeps == [] and (fake_lib.resize, user.AUGS["blur"]) == (resize, blur)
    with Patcher("test", stable_references=True) as patcher:
        patcher.patch_many(["fakelib.resize", "fakelib.blur"], factory)
        user.LATER = {"op": fake_lib.blur}  # bound at run time, after patching
    assert sweeps == [1]
    assert user.LATER["op"] is blur and fake_lib.resize is resize
    with Patcher("test") as patcher:  # by default every restore sweeps
        patcher.patch_many(["fakelib.resize", "fakelib.blur"], factory)
    assert sweeps == [1, 2]


def test_a_reference_made_after_one_alias_was_restored_is_still_swept(
    fake_lib: types.ModuleType, sweeps: list[int]
) -> None:
    fake_lib.resize_alias = fake_lib.resize
    original = fake_lib.resize
    shared = {}
    patcher = Patcher("test", stable_references=True)
    patcher.patch_many(
        ["fakelib.resize", "fakelib.resize_alias"],
        lambda name, orig: shared.setdefault("fn", lambda x: 0),
    )
    assert patcher.restore("fakelib.resize") == 1
    user = sys.modules["userpipeline"]
    user.KEPT = [fake_lib.resize_alias]
    assert patcher.restore() == 1
    assert [original] == user.KEPT and fake_lib.resize_alias is original
    assert sweeps == [1]


def test_restoring_one_alias_keeps_the_other_patched(fake_lib: types.ModuleType) -> None:
    fake_lib.resize_alias = fake_lib.resize
    original = fake_lib.resize
    shared = {}

    def factory(name: str, orig: object) -> object:
        return shared.setdefault("fn", lambda x: 0)

    patcher = Patcher("test")
    patcher.patch_many(["fakelib.resize", "fakelib.resize_alias"], factory)
    assert patcher.restore("fakelib.resize") == 1
    assert fake_lib.resize is original and fake_lib.resize_alias is shared["fn"]
    assert patcher.restore() == 1 and fake_lib.resize_alias is original


def test_restore_of_real_numpy_patches_reaches_a_fresh_module(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    import numpy as np

    folder = Path(str(tmp_path))
    (folder / "fresh_numpy_user.py").write_text(
        "from numpy import sin, cos\nimport numpy as np\nFUNCS = {'sin': np.sin, 'cos': cos}\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    sin, cos = np.sin, np.cos
    with Patcher("test") as patcher:
        patcher.patch_many(["numpy.sin", "numpy.cos"], lambda name, orig: lambda *a: "patched")
        import fresh_numpy_user as user  # type: ignore[import-not-found]

        assert user.sin(0.0) == "patched" and user.FUNCS["cos"](0.0) == "patched"
    monkeypatch.delitem(sys.modules, "fresh_numpy_user")
    assert np.sin is sin and user.sin is sin and user.cos is cos
    assert {"sin": sin, "cos": cos} == user.FUNCS


def test_tracer_windows_leave_no_recording_wrapper_in_a_fresh_module(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    from pathlib import Path

    import cv2
    import numpy as np

    from codedag.trace.tracer import EnhancedTracer

    folder = Path(str(tmp_path))
    (folder / "fresh_traced_user.py").write_text(
        "from numpy import clip, zeros\nfrom cv2 import resize\nimport cv2\n"
        "OPS = {'clip': clip, 'flip': cv2.flip}\nCHAIN = [resize, zeros]\n"
    )
    monkeypatch.syspath_prepend(str(folder))
    originals = (np.clip, np.zeros, cv2.resize, cv2.flip)
    tracer = EnhancedTracer()
    with tracer.tracing_context():
        import fresh_traced_user as user  # type: ignore[import-not-found]

        # the window's recording wrapper (numpy.clip, implemented in Python, is not wrapped:
        # the tracer records its frame)
        assert user.zeros is not originals[1]
        user.zeros(3)
    monkeypatch.delitem(sys.modules, "fresh_traced_user")
    assert (user.clip, user.zeros, user.resize, user.OPS["flip"]) == originals
    assert user.OPS["clip"] is np.clip and [cv2.resize, np.zeros] == user.CHAIN
    assert (np.clip, np.zeros, cv2.resize, cv2.flip) == originals

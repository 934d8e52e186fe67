"""PatchInjector: what is patched, aliases, rollback, complete restore, merged statistics."""

from __future__ import annotations

import logging
import sys
from pathlib import Path
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from migrate_support import CALLS, make_registry, plan_for, sin

from codedag.errors import MigrationError
from codedag.migrate.api import PipelineMigrator
from codedag.migrate.dispatch import FETCH, ITERABLE_FETCH
from codedag.migrate.injector import PatchInjector
from codedag.migrate.sites import alias_paths
from codedag.migrate.spawned_workers import HOOK

GET = "app.DS.__getitem__"


def test_plan_naming_a_non_migratable_function_is_refused() -> None:
    original = cv2.flip
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu", f"{GET}#0/os.system#0": "cpu"})
    migrator = PipelineMigrator.from_plan(plan, registry=make_registry())
    with pytest.raises(MigrationError, match=r"os\.system"):
        migrator.apply()
    assert cv2.flip is original and not migrator.is_applied()


def test_unknown_names_warn_and_are_skipped(caplog: pytest.LogCaptureFixture) -> None:
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu", f"{GET}#0/mylib.fancy_op#0": "cpu"})
    migrator = PipelineMigrator.from_plan(plan, registry=make_registry())
    with caplog.at_level(logging.WARNING, logger="codedag.migrate"):
        counts = migrator.apply()
    try:
        assert counts == {"patched": 1, "failed": 0, "skipped": 1}
        assert "mylib.fancy_op" in caplog.text
        assert migrator.get_stats()["skipped"] == {
            "mylib.fancy_op": "not in the registry of migratable functions"
        }
    finally:
        migrator.restore()


def test_a_failure_while_applying_leaves_nothing_patched(monkeypatch: pytest.MonkeyPatch) -> None:
    from codedag.migrate import sites as sites_module

    original_flip, original_clip = cv2.flip, np.clip
    calls = {"n": 0}
    real = sites_module.alias_paths

    def failing(name: str, raw: object, registered: set[str], index: Any = None) -> list[str]:
        calls["n"] += 1
        if calls["n"] == 2:
            raise RuntimeError("boom while patching")
        return real(name, raw, registered, index)

    monkeypatch.setattr(sites_module, "alias_paths", failing)
    plan = plan_for({f"{GET}#0/cv2.flip#0": "cpu", f"{GET}#0/numpy.clip#0": "cpu"})
    migrator = PipelineMigrator.from_plan(plan, registry=make_registry())
    with pytest.raises(RuntimeError, match="boom"):
        migrator.apply()
    assert cv2.flip is original_flip and np.clip is original_clip
    assert not migrator.is_applied()


FRESH = """
from numpy import sin, cos, clip
import numpy as np
import cv2
from cv2 import flip

AUGMENT = {"sin": sin, "clip": np.clip, "flip": cv2.flip}
STEPS = [flip, sin]


def run(x):
    return sin(x), AUGMENT["sin"](x)
"""


def test_restore_reaches_a_module_imported_while_applied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "fresh_migrated_user.py").write_text(FRESH)
    monkeypatch.syspath_prepend(str(tmp_path))
    originals = {"sin": np.sin, "clip": np.clip, "flip": cv2.flip}
    plan = plan_for({f"{GET}#0/{n}#0": "cpu" for n in ("numpy.sin", "numpy.clip", "cv2.flip")})
    registry = make_registry(**{"numpy.sin": sin})
    with PipelineMigrator.from_plan(plan, registry=registry) as migrator:
        import fresh_migrated_user as user  # type: ignore[import-not-found]

        assert user.sin is np.sin and user.sin is not originals["sin"]
        user.run(np.full(2, 0.5, np.float32))
        bound = sum(
            value is replacement
            for value in (user.sin, user.clip, user.flip, *user.AUGMENT.values(), *user.STEPS)
            for replacement in (np.sin, np.clip, cv2.flip)
        )
        assert bound == 8
    monkeypatch.delitem(sys.modules, "fresh_migrated_user")
    assert user.sin is originals["sin"] and user.clip is originals["clip"]
    assert user.flip is originals["flip"] and user.cos is np.cos
    assert originals == user.AUGMENT
    assert [originals["flip"], originals["sin"]] == user.STEPS
    counts = migrator.get_stats()["totals"]
    for _ in range(3):
        user.run(np.full(2, 0.5, np.float32))
    assert migrator.get_stats()["totals"] == counts  # no counter rises after restore


def test_aliases_share_one_wrapper_and_one_count() -> None:
    absolute = np.absolute
    assert "numpy.absolute" in alias_paths("numpy.abs", absolute, set())

    def abs_backend(x: torch.Tensor, out: object = None) -> torch.Tensor:
        return torch.abs(x)

    plan = plan_for({f"{GET}#0/numpy.abs#0": "cpu"})
    with PipelineMigrator.from_plan(
        plan, registry=make_registry(**{"numpy.abs": abs_backend})
    ) as m:
        assert np.abs is np.absolute and np.abs is not absolute
        np.abs(np.array([-1.0, 2.0]))
        np.absolute(np.array([-3.0]))
        # the fetch: a data set's own references (a partial in its transforms) are rebound there
        assert m.patched_functions() == ["numpy.abs", "numpy.absolute", ITERABLE_FETCH, FETCH, HOOK]
    assert np.absolute is absolute and np.abs is absolute
    assert m.get_stats()["functions"]["numpy.abs"]["migrated"] == 2


def test_a_function_a_subpackage_re_exports_is_patched_there_too() -> None:
    # ``librosa.feature.delta`` is ``librosa.feature.utils.delta``: the subpackage is neither the
    # function's module nor its top package, and code reaches the function through it
    import librosa

    original = librosa.feature.delta
    name = "librosa.feature.utils.delta"
    assert "librosa.feature.delta" in alias_paths(name, original, set())

    def delta_backend(data: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(original(data.numpy()))

    plan = plan_for({f"{GET}#0/{name}#0": "cpu"})
    with PipelineMigrator.from_plan(plan, registry=make_registry(**{name: delta_backend})) as m:
        assert librosa.feature.delta is not original
        librosa.feature.delta(np.arange(24.0).reshape(2, 12))
        assert m.get_stats()["functions"][name]["migrated"] == 1
    assert librosa.feature.delta is original


def test_stats_merge_the_workers_and_restore_deactivates() -> None:
    entries = {"cv2.flip": [(f"{GET}#0/cv2.flip#0", "cpu")]}
    injector = PatchInjector(entries, make_registry(), {})
    assert injector.apply_all() == {"patched": 1, "failed": 0, "skipped": 0}
    before = CALLS["flip"]
    try:
        cv2.flip(np.zeros((2, 3), np.uint8), 1)
        held = [cv2.flip]
    finally:
        # and where a data set's references are rebound: where a loader makes its iterator, fetches
        assert injector.restore_all() == 4
    stats = injector.stats()["cv2.flip"]
    assert stats["migrated"] == 1 and stats["in_workers"]["migrated"] == 0
    assert stats["guard"]["state"] == "disabled"
    held[0](np.zeros((2, 3), np.uint8), 0)  # a list of the test's own: not a module's
    assert CALLS["flip"] == before + 1 and injector.stats()["cv2.flip"]["migrated"] == 1
    assert injector.workers is not None and not injector.workers.tracking


def test_check_lists_what_would_be_patched() -> None:
    entries = {
        "cv2.flip": [(f"{GET}#0/cv2.flip#0", "cpu")],
        "cv2.add": [(f"{GET}#0/cv2.add#0", None)],  # kept on the CPU everywhere: not patched
        "mylib.op": [(f"{GET}#0/mylib.op#0", "cpu")],
    }
    injector = PatchInjector(entries, make_registry(), {})
    assert injector.check() == ["cv2.flip"]
    assert injector.skipped == {"mylib.op": "not in the registry of migratable functions"}
    with pytest.raises(MigrationError, match="must stay on the CPU"):
        PatchInjector({"os.system": [("a#0/os.system#0", "cpu")]}, make_registry(), {}).check()

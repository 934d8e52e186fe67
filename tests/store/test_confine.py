"""A plan's cache folder is confined to the user's cache folders; the user's own is not."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from prefix_support import cache_section

from codedag.store.confine import plan_cache_folder, trusted_roots


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("CODEDAG_CACHE_DIR", str(tmp_path / "user-cache"))
    monkeypatch.setenv("CODEDAG_PREFIX_CACHE_DIR", str(tmp_path / "prefix-cache"))
    monkeypatch.chdir(tmp_path)
    return tmp_path / "user-cache"


def test_folders_inside_the_user_cache_or_the_prefix_folder_are_kept(cache_dir: Path) -> None:
    assert trusted_roots() == [cache_dir, cache_dir.parent / "prefix-cache"]
    for folder in (cache_dir / "prefix" / "mine", cache_dir.parent / "prefix-cache" / "x"):
        assert plan_cache_folder(str(folder)) == folder
    assert plan_cache_folder("user-cache/sub") == Path("user-cache/sub")  # relative, inside


@pytest.mark.parametrize("folder", ["../../x", "/etc/codedag", "user-cache/../../x", "elsewhere"])
def test_folders_outside_are_refused_with_one_warning(
    cache_dir: Path, caplog: pytest.LogCaptureFixture, folder: str
) -> None:
    with caplog.at_level(logging.WARNING):
        assert plan_cache_folder(folder) is None
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1 and folder in warnings[0].getMessage()
    assert "using the default folder" in warnings[0].getMessage()


def test_a_link_inside_the_user_cache_pointing_out_is_refused(cache_dir: Path) -> None:
    cache_dir.mkdir()
    (cache_dir / "link").symlink_to(cache_dir.parent / "outside", target_is_directory=True)
    assert plan_cache_folder(str(cache_dir / "link" / "store")) is None


def test_a_caller_may_trust_another_root(tmp_path: Path, cache_dir: Path) -> None:
    out = tmp_path / "run-out"
    assert plan_cache_folder(str(out / "cache"), [*trusted_roots(), out]) == out / "cache"


def _plan(folder: str) -> dict[str, Any]:
    return {"context_device_map": {}, "cache": {**cache_section(), "folder": folder}}


def test_the_migrator_uses_the_default_folder_for_a_plan_folder_outside(
    tmp_path: Path, cache_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from codedag.migrate.api import PipelineMigrator

    with caplog.at_level(logging.WARNING):
        migrator = PipelineMigrator(_plan(str(tmp_path / "evil")), guard=False)
    assert migrator._cache.settings.store.folder is None  # the default folder
    assert "evil" in caplog.text and not (tmp_path / "evil").exists()
    inside = cache_dir / "prefix" / "plan"
    migrator = PipelineMigrator(_plan(str(inside)), guard=False)
    assert migrator._cache.settings.store.folder == inside


def test_a_folder_the_user_gives_is_the_users_own(tmp_path: Path, cache_dir: Path) -> None:
    from codedag.migrate.api import PipelineMigrator
    from codedag.migrate.cache.runtime import CacheSettings
    from codedag.store.tiers import StoreSettings

    mine = tmp_path / "scratch" / "cache"
    settings = CacheSettings(store=StoreSettings(folder=mine))
    migrator = PipelineMigrator(_plan(str(tmp_path / "evil")), guard=False, cache=settings)
    assert migrator._cache.settings.store.folder == mine

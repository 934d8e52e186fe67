"""Old import paths of moved modules import, warn once naming the new module, and give the same
objects."""

from __future__ import annotations

import importlib
import subprocess
import sys
import warnings

import pytest

MOVED = {
    "codedag.migrate.registry": "codedag.backends.registry",
    "codedag.migrate.tolerances": "codedag.backends.tolerances",
    "codedag.migrate.probe": "codedag.backends.probe",
}


@pytest.mark.parametrize(("old", "new"), MOVED.items())
def test_an_old_path_warns_once_and_gives_the_new_modules_objects(
    old: str, new: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=rf"{old} moved to {new}; import it from there"):
        alias = importlib.import_module(old)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert importlib.import_module(old) is alias  # imported once: no second warning
    target = importlib.import_module(new)
    public = getattr(target, "__all__", None) or ["migrated_call", "original_function"]
    assert sorted(alias.__all__) == sorted(public)
    for name in public:
        assert getattr(alias, name) is getattr(target, name), name


def test_the_names_earlier_releases_documented_are_there() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        from codedag.migrate.probe import migrated_call
        from codedag.migrate.registry import Registry, default_registry
        from codedag.migrate.tolerances import TOLERANCES, difference

    from codedag.backends import probe, registry, tolerances

    assert migrated_call is probe.migrated_call and difference is tolerances.difference
    assert Registry is registry.Registry and default_registry is registry.default_registry
    assert TOLERANCES is tolerances.TOLERANCES


def test_the_warning_points_at_the_importing_line_and_shows_by_default(tmp_path) -> None:
    script = tmp_path / "old_code.py"
    script.write_text(
        "import importlib\n"
        "import codedag.migrate.registry\n"
        "from codedag.migrate.tolerances import difference\n"
        "importlib.import_module('codedag.migrate.probe')\n"
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stderr.splitlines() if "DeprecationWarning" in line]
    assert [line.split(": DeprecationWarning")[0] for line in lines] == [
        f"{script}:2",
        f"{script}:3",
        f"{script}:4",
    ]
    assert "codedag.migrate.probe moved to codedag.backends.probe" in lines[2]

"""Loading a target named on the command line: script paths and module paths, and one clear
error for each way the name can be wrong."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from codedag.errors import ConfigError, TraceError
from codedag.util.targets import load_target


@pytest.fixture(autouse=True)
def _restore_imports(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Loading a script adds its folder to sys.path and the script to sys.modules: undone."""
    monkeypatch.setattr(sys, "path", list(sys.path))
    before = set(sys.modules)
    yield
    for name in set(sys.modules) - before:
        if "target" in name:
            del sys.modules[name]


def _script(tmp_path: Path, body: str, name: str = "pipeline_target.py") -> Path:
    path = tmp_path / name
    path.write_text(body, encoding="utf-8")
    return path


def test_a_function_of_a_script_is_loaded_and_its_folder_importable(tmp_path: Path) -> None:
    _script(tmp_path, "VALUE = 41\n", "helper_mod_for_targets.py")
    path = _script(
        tmp_path,
        "import helper_mod_for_targets\n"
        "class Holder:\n    @staticmethod\n    def build():\n        return 'built'\n"
        "def main(scale=1):\n    return helper_mod_for_targets.VALUE + scale\n",
    )
    assert load_target(f"{path}:main")() == 42
    assert load_target(f"{path}:Holder.build")() == "built"


def test_a_module_function_is_loaded_by_its_dotted_name() -> None:
    assert load_target("os:getcwd")() == str(Path.cwd())
    assert load_target("pathlib:Path.cwd")() == Path.cwd()  # an attribute path after the colon


def test_a_module_of_the_current_folder_is_found_as_python_m_finds_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _script(tmp_path, "def make():\n    return 'made'\n", "loader_target_here.py")
    monkeypatch.chdir(tmp_path)
    for entry in ("", ".", str(tmp_path)):
        while entry in sys.path:
            sys.path.remove(entry)
    assert load_target("loader_target_here:make")() == "made"


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("no_colon", "names no function"),
        ("os:", "is incomplete"),
        ("no_such_module_xyz:f", "module 'no_such_module_xyz' not found"),
        ("os:no_such_attribute", "has no attribute 'no_such_attribute'"),
        ("os:sep", "is a str, not callable"),
        ("os.path:join", "requires arguments"),
        ("missing/file.py:main", "does not exist"),
    ],
)
def test_each_mistake_gets_its_own_message(spec: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        load_target(spec)


def test_a_failing_import_is_reported_with_the_chosen_error_class(tmp_path: Path) -> None:
    path = _script(tmp_path, "raise RuntimeError('boom')\n", "broken_target.py")
    with pytest.raises(TraceError, match=r"importing .* raised RuntimeError: boom"):
        load_target(f"{path}:main", what="--dataloader", raises=TraceError)

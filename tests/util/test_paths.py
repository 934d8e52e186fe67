"""Output paths are checked before any work, without creating anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codedag.errors import ConfigError
from codedag.util.paths import check_output_dir, check_output_file


def test_good_paths_pass_and_create_nothing(tmp_path: Path) -> None:
    assert check_output_dir(tmp_path / "a" / "b") == tmp_path / "a" / "b"
    assert check_output_file(tmp_path / "c" / "stats.json") == tmp_path / "c" / "stats.json"
    assert check_output_dir(tmp_path) == tmp_path
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("make", "problem"),
    [
        (lambda t: check_output_dir(t / "file"), "is a file; expected a folder"),
        (lambda t: check_output_dir(t / "file" / "sub"), "is a file, so no folder can be made"),
        (lambda t: check_output_file(t), "is a folder; expected a file name"),
        (lambda t: check_output_file(f"{t}/new/"), "is a folder; expected a file name"),
        (lambda t: check_output_file(t / "file" / "x.json"), "is a file, so no folder"),
        (lambda t: check_output_file("/dev/null"), "is not a regular file"),
        (lambda t: check_output_dir("/proc/codedag-out"), "cannot write into"),
        (lambda t: check_output_file("/proc/x.json"), "cannot write into"),
    ],
)
def test_bad_paths_are_one_clear_error(tmp_path: Path, make, problem: str) -> None:
    (tmp_path / "file").write_text("keep me")
    with pytest.raises(ConfigError, match=problem) as info:
        make(tmp_path)
    assert "\n" not in str(info.value)
    assert (tmp_path / "file").read_text() == "keep me"


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_folder(tmp_path: Path) -> None:
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(ConfigError, match="Permission denied"):
            check_output_dir(tmp_path / "out")
    finally:
        tmp_path.chmod(0o700)

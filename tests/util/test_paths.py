"""Output paths are checked before any work, without creating anything."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codedag.errors import ConfigError
from codedag.util.paths import check_output_dir, check_output_file, output_lock


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


def test_an_empty_path_is_refused_not_taken_as_the_current_folder() -> None:
    with pytest.raises(ConfigError, match="--out is empty"):
        check_output_dir("")
    with pytest.raises(ConfigError, match="--csv is empty"):
        check_output_file("  ", "--csv")


def test_a_folder_in_use_by_another_run_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "out"
    with output_lock(out):
        (out / "results.json").write_text("{}")
        with (
            pytest.raises(ConfigError, match=f"in use by another codedag run \\(pid {os.getpid()}"),
            output_lock(out),
        ):
            pass  # pragma: no cover
    with output_lock(out):  # released: the next run may write
        pass
    assert (out / "results.json").read_text() == "{}"


def test_a_run_that_wrote_nothing_leaves_no_folder(tmp_path: Path) -> None:
    with output_lock(tmp_path / "new"):
        assert (tmp_path / "new").is_dir()
    assert list(tmp_path.iterdir()) == []


def test_two_demos_into_one_folder_do_not_mix(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_inputs import assert_one_line_error, run_cli

    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "results.json").write_text("{}")
    with output_lock(tmp_path / "d"):  # a demo running there
        result = run_cli(capsys, "demo", "--out", tmp_path / "d", "--batches", "1")
    assert_one_line_error(result, "in use by another codedag run")
    assert sorted(p.name for p in (tmp_path / "d").iterdir()) == [".codedag.lock", "results.json"]
    assert (tmp_path / "d" / "results.json").read_text() == "{}"


def test_a_report_into_a_folder_in_use_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_inputs import assert_one_line_error, make_results, run_cli

    results = make_results(tmp_path)
    capsys.readouterr()  # the run that made the results file
    plots = tmp_path / "plots"
    plots.mkdir()
    with output_lock(plots):  # another report drawing there
        result = run_cli(capsys, "report", results, "--out", plots)
    assert_one_line_error(result, "--out")
    assert_one_line_error(result, "in use by another codedag run")
    assert [p.name for p in plots.iterdir()] == [".codedag.lock"]
    assert run_cli(capsys, "report", results, "--out", plots)[0] == 0
    assert any(p.suffix == ".png" for p in plots.iterdir())


@pytest.mark.parametrize("kind", ["symlink", "hardlink"])
def test_a_lock_file_that_is_a_link_is_refused_and_its_target_kept(
    tmp_path: Path, kind: str
) -> None:
    from codedag.errors import WriteError

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    out = tmp_path / "out"
    out.mkdir()
    lock = out / ".codedag.lock"
    if kind == "symlink":
        lock.symlink_to(victim)
    else:
        os.link(victim, lock)
    with pytest.raises(WriteError, match=r"symbolic link|hard links"), output_lock(out):
        pass  # pragma: no cover
    assert victim.read_text() == "keep me"


def test_trace_into_a_folder_whose_lock_is_a_link_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from cli_inputs import assert_one_line_error, run_cli

    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    target = tmp_path / "t.py"
    target.write_text("import numpy as np\n\ndef ok():\n    return np.clip(np.ones(3), 0, 1)\n")
    out = tmp_path / "out"
    out.mkdir()
    (out / ".codedag.lock").symlink_to(victim)
    result = run_cli(capsys, "trace", f"{target}:ok", "--out", out)
    assert_one_line_error(result, ".codedag.lock: it is a symbolic link")
    assert victim.read_text() == "keep me"
    assert [p.name for p in out.iterdir()] == [".codedag.lock"]

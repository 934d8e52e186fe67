"""One raw CSV stream: header once, replace then append, a failing disk stops only the stream."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from codedag.monitor.spill import CsvSpill


def test_first_write_replaces_an_earlier_runs_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "mode.batches.csv"
    path.parent.mkdir()
    path.write_text("old,header\n1,2\n")
    spill = CsvSpill(path, "a,b")
    spill.write("3,4")
    spill.write_lines(["5,6", "7,8"])
    spill.write_lines([])
    spill.flush()
    assert path.read_text() == "a,b\n3,4\n5,6\n7,8\n"
    assert spill.rows == 3
    spill.close()


def test_a_write_after_close_appends_without_a_second_header(tmp_path: Path) -> None:
    path = tmp_path / "s.csv"
    spill = CsvSpill(path, "h")
    spill.write("1")
    spill.close()
    spill.write("2")
    spill.close()
    assert path.read_text() == "h\n1\n2\n"


def test_no_path_makes_every_call_a_no_op() -> None:
    spill = CsvSpill(None, "h")
    spill.write("1")
    spill.flush()
    spill.close()
    assert spill.rows == 0


def test_an_unwritable_place_warns_once_and_keeps_going(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    spill = CsvSpill(blocker / "s.csv", "h")  # a folder that is a file
    with caplog.at_level(logging.WARNING):
        spill.write("1")
        spill.write("2")
    assert spill.rows == 0
    assert sum("cannot write raw samples" in r.getMessage() for r in caplog.records) == 1


def test_a_link_in_place_of_the_stream_warns_and_its_target_is_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    (tmp_path / "raw.csv").symlink_to(victim)
    spill = CsvSpill(tmp_path / "raw.csv", "a,b")
    with caplog.at_level(logging.WARNING):
        spill.write("1,2")
    spill.close()
    assert victim.read_text() == "keep me"
    assert "symbolic link" in caplog.text

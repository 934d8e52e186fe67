"""Monitors ignore calls outside their own process and silence their streams after a fork."""

from __future__ import annotations

import logging
import os
from pathlib import Path

import pytest

import codedag.monitor.forksafe as forksafe


def test_calls_in_the_owner_process_are_not_ignored() -> None:
    assert forksafe.ignored_here(os.getpid(), "log_batch") is False


def test_calls_elsewhere_are_ignored_with_one_warning_per_process(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(forksafe, "_warned_pid", None)
    with caplog.at_level(logging.WARNING, logger=forksafe.__name__):
        assert forksafe.ignored_here(-1, "log_batch") is True
        assert forksafe.ignored_here(-1, "log_epoch") is True
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1
    assert "log_batch" in warnings[0].getMessage()


class _Monitor:
    def __init__(self, files: list[object]) -> None:
        self.files = files

    def open_stream_files(self) -> list[object]:
        return self.files


def test_after_a_fork_stream_files_write_to_devnull(tmp_path: Path) -> None:
    # Run the child's hook here on a file of our own: its later writes must not reach the file.
    path = tmp_path / "batches.csv"
    with path.open("w") as fh:
        fh.write("kept\n")
        fh.flush()
        monitor = _Monitor([fh])
        forksafe.register(monitor)
        assert monitor in forksafe._monitors
        forksafe._after_fork_in_child()
        fh.write("lost\n")
    assert path.read_text() == "kept\n"


def test_silencing_a_closed_file_is_harmless(tmp_path: Path) -> None:
    fh = (tmp_path / "x").open("w")
    fh.close()
    forksafe._silence(fh)

"""A DAG drawing that cannot be made never fails what asked for it: DOT is written instead."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from codedag.cli.main import main
from codedag.trace import dot

DATASETS = Path(__file__).parent.parent / "support" / "trace_datasets.py"


def fake_dot(folder: Path, body: str) -> None:
    """A ``dot`` program on PATH that runs ``body`` (a shell line)."""
    folder.mkdir(parents=True, exist_ok=True)
    program = folder / "dot"
    program.write_text(f"#!/bin/sh\n{body}\n")
    program.chmod(0o755)


@pytest.mark.parametrize(
    ("body", "says"),
    [("sleep 20", "took longer than 1 s"), ("echo 'syntax error' >&2; exit 1", "syntax error")],
)
def test_a_slow_or_failing_dot_gives_dot_text_and_a_warning(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    body: str,
    says: str,
) -> None:
    fake_dot(tmp_path / "bin", body)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setattr(dot, "DOT_TIMEOUT_S", 1.0)
    code = main(["trace", f"{DATASETS}:pipeline", "--out", str(tmp_path / "out"), "--json"])
    assert code == 0  # the trace is the result; the drawing is an extra
    assert (tmp_path / "out" / "dag.json").is_file()
    assert (tmp_path / "out" / "dag.dot").read_text().startswith("digraph codedag {")
    assert not (tmp_path / "out" / "dag.svg").exists()
    assert says in capsys.readouterr().err  # the CLI's log handler

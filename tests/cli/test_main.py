"""The CLI skeleton: help, version, unknown commands and flags, error mapping."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from codedag.cli import main as cli_main
from codedag.errors import ConfigError
from codedag.version import __version__


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "codedag", *args], capture_output=True, text=True, timeout=120
    )


def test_version() -> None:
    out = run_cli("--version")
    assert out.returncode == 0 and out.stdout.strip() == f"codedag {__version__}"


def test_help_lists_every_subcommand() -> None:
    out = run_cli("--help")
    assert out.returncode == 0
    for name in cli_main.SUBCOMMANDS:
        assert name in out.stdout


@pytest.mark.parametrize("name", cli_main.SUBCOMMANDS)
def test_every_subcommand_has_help(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli_main.main([name, "--help"])
    assert exit_info.value.code == 0
    assert "usage: codedag " + name in capsys.readouterr().out


@pytest.mark.parametrize("args", [["no-such-command"], ["doctor", "--no-such-flag"], []])
def test_unknown_command_or_flag_is_one_line_and_exit_2(args: list[str]) -> None:
    out = run_cli(*args)
    assert out.returncode == 2
    (line,) = out.stderr.splitlines()
    assert line.startswith("codedag") and "error:" in line and "--help)" in line


def test_codedag_errors_become_one_line_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def failing(args: argparse.Namespace) -> int:
        raise ConfigError("expected a positive batch size, got -3")

    import codedag.cli.doctor

    monkeypatch.setattr(codedag.cli.doctor, "run", failing)
    assert cli_main.main(["doctor"]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "codedag doctor: error: expected a positive batch size, got -3"


def test_verbose_and_quiet_reach_the_subcommand() -> None:
    parser = cli_main.build_parser()
    assert parser.parse_args(["-v", "doctor"]).verbose == 1
    assert parser.parse_args(["doctor", "-vv"]).verbose == 2
    assert parser.parse_args(["doctor", "-q"]).quiet is True
    assert parser.parse_args(["doctor"]).quiet is False

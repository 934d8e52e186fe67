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


def test_a_command_line_registers_only_the_subcommand_it_names() -> None:
    assert cli_main.named_command(["-v", "run", "--", "python", "doctor"]) == "run"
    assert cli_main.named_command(["--help", "run"]) is None  # the top-level help lists all
    assert cli_main.named_command(["no-such-command"]) is None
    assert cli_main.named_command(["-q"]) is None
    parser = cli_main.build_parser("run")
    (subparsers,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    assert list(subparsers.choices) == ["run"]
    assert parser.parse_args(["-v", "run", "--", "python", "x.py"]).verbose == 1


def test_the_log_handler_is_installed_by_the_first_record(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import logging

    logger = logging.getLogger("codedag")
    cli_main._FirstRecord.install(0)
    (name,) = [h.get_name() for h in logger.handlers if isinstance(h, cli_main._FirstRecord)]
    try:
        assert logger.level == logging.INFO
        logger.setLevel(logging.WARNING)  # as codedag run sets it
        logging.getLogger("codedag.x").info("hidden")
        logging.getLogger("codedag.x").warning("shown %d", 7)
        assert not any(isinstance(h, cli_main._FirstRecord) for h in logger.handlers)
        assert [h.get_name() for h in logger.handlers].count(name) == 1  # the CLI's own
        assert logger.level == logging.WARNING and not logger.propagate
        logging.getLogger("codedag.x").warning("shown again")
        err = capsys.readouterr().err
        assert "shown 7" in err and "shown again" in err and "hidden" not in err
    finally:
        for old in [h for h in logger.handlers if h.get_name() == name]:
            logger.removeHandler(old)


def test_a_record_from_another_thread_before_the_handler_is_written_plainly(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The prefix cache's writer thread logs while the loading thread draws: importing rich
    there (it draws from Python's random, put back) would shift the loading thread's draws."""
    import logging
    import random
    import sys
    import threading

    monkeypatch.delitem(sys.modules, "rich.style", raising=False)  # as before rich is imported
    logger = logging.getLogger("codedag")
    cli_main._FirstRecord.install(0)
    (name,) = [h.get_name() for h in logger.handlers if isinstance(h, cli_main._FirstRecord)]
    try:
        state = random.getstate()
        thread = threading.Thread(target=lambda: logger.warning("from the writer %d", 3))
        thread.start()
        thread.join()
        assert random.getstate() == state and "rich.style" not in sys.modules
        assert any(isinstance(h, cli_main._FirstRecord) for h in logger.handlers)
        assert capsys.readouterr().err == "WARNING  from the writer 3\n"
        # bounded and masked as the handler's own records are
        url = "https://user:secret@example.com/data"
        thread = threading.Thread(target=lambda: logger.warning("reading %s", url))
        thread.start()
        thread.join()
        err = capsys.readouterr().err
        assert err.startswith("WARNING  reading https://") and "secret" not in err
    finally:
        for old in [h for h in logger.handlers if h.get_name() == name]:
            logger.removeHandler(old)

"""Fixtures of the migration tests: the shared helpers live in ``migrate_support`` (this folder is
on ``sys.path`` for every test below it). The conformance counts are printed at the end."""

from __future__ import annotations

import pytest


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    import sys

    support = sys.modules.get("migrate_support")
    tally = getattr(support, "TALLY", None)
    if tally is None or not tally.counts:
        return
    for line in tally.lines():
        terminalreporter.write_line(line)

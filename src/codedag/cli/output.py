"""What commands print: one JSON document on stdout for ``--json``, the Rich console of their
tables, their cells' figures, and a progress bar."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console


def print_json(
    data: Any, indent: int | None = None, default: Callable[[Any], Any] | None = None
) -> None:
    """Write ``data`` to stdout as JSON and end the line (``default``: as :func:`json.dump`)."""
    json.dump(data, sys.stdout, indent=indent, default=default)
    sys.stdout.write("\n")


def figure(value: Any, scale: float = 1.0, digits: int = 2, suffix: str = "") -> str:
    """A table cell: ``value * scale`` with ``digits`` decimals and ``suffix`` ("-": no value)."""
    if value is None:
        return "-"
    return f"{value * scale:.{digits}f}{suffix}"


def stdout_console(width: int = 160) -> Console:
    """A Rich console on stdout: the terminal's width, or ``width`` columns when piped."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=width)


def progress_bar(console: Console, label: str) -> tuple[Any, Callable[[int, int, str], None]]:
    """A transient progress bar titled ``label`` (``{task.description}`` stands for what runs
    now) and the ``progress(done, total, what)`` callback that drives it.

    Without a terminal (logs, pipes, tests) the bar is a no-op: nothing is drawn or left behind.
    """
    import contextlib

    if not console.is_terminal:
        return contextlib.nullcontext(), lambda done, total, what: None
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    bar = Progress(
        TextColumn(label),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
        transient=True,
    )
    task = bar.add_task("", total=None)

    def update(done: int, total: int, what: str) -> None:
        bar.update(task, completed=done, total=total, description=what)

    return bar, update

"""What commands print for ``--json``: one JSON document on stdout, ended by a newline; the Rich
console of their tables."""

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


def stdout_console(width: int = 160) -> Console:
    """A Rich console on stdout: the terminal's width, or ``width`` columns when piped."""
    from rich.console import Console

    return Console() if sys.stdout.isatty() else Console(width=width)

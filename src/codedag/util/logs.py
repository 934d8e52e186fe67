"""Logging set-up for the CLI and scripts. Library modules only call ``logging.getLogger``."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import TextIO

_HANDLER_NAME = "codedag-cli"


def level_for(verbosity: int) -> int:
    """Map -q/-v counts (negative is quieter) to a logging level."""
    if verbosity <= -1:
        return logging.WARNING
    if verbosity == 0:
        return logging.INFO
    return logging.DEBUG


def setup_logging(verbosity: int = 0, stream: TextIO | None = None) -> logging.Logger:
    """Install one rich handler on the ``codedag`` logger.

    Colors appear only when ``stream`` is a terminal; piped output is plain text. Under a
    distributed launcher only rank 0 logs; other ranks keep errors only. Calling it again replaces
    the handler, so it is safe in tests and notebooks.

    Args:
        verbosity: 0 for INFO, 1+ for DEBUG, -1 for WARNING.
        stream: where to write; standard error by default.

    Returns:
        The ``codedag`` logger.
    """
    from rich.console import Console
    from rich.logging import RichHandler

    stream = stream if stream is not None else sys.stderr
    is_tty = hasattr(stream, "isatty") and stream.isatty()
    console = Console(
        file=stream,
        force_terminal=is_tty,
        no_color=not is_tty,
        highlight=False,
        width=None if is_tty else 200,
    )
    handler = RichHandler(
        console=console,
        show_time=is_tty,
        show_path=False,
        rich_tracebacks=False,
        markup=False,
    )
    handler.set_name(_HANDLER_NAME)
    handler.setFormatter(logging.Formatter("%(message)s"))

    logger = logging.getLogger("codedag")
    for old in list(logger.handlers):
        if old.get_name() == _HANDLER_NAME:
            logger.removeHandler(old)
    logger.addHandler(handler)
    logger.propagate = False
    from codedag.devices.distributed import distributed_rank

    rank, _ = distributed_rank()
    level = level_for(verbosity) if rank == 0 else logging.ERROR
    logger.setLevel(level)
    return logger


@contextlib.contextmanager
def held_logs(name: str = "codedag") -> Iterator[None]:
    """Hold the log records of a block: shown when it succeeds, dropped when it raises.

    For a short checking step (reading and applying a plan) whose warnings only matter if it
    succeeds: when it fails, the error alone is the one line the user sees.
    """
    logger = logging.getLogger(name)
    held: list[logging.LogRecord] = []

    class _Hold(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            held.append(record)

    handlers, propagate = logger.handlers[:], logger.propagate
    logger.handlers, logger.propagate = [_Hold()], False
    try:
        yield
    finally:
        logger.handlers, logger.propagate = handlers, propagate
    for record in held:  # reached only when the block did not raise
        logger.handle(record)

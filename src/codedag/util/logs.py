"""Logging set-up for the CLI and scripts. Library modules only call ``logging.getLogger``.

The CLI's handler shows every record as bounded text: URI credentials masked, control characters
escaped, a message cut past :data:`MAX_MESSAGE_CHARS`, and after :data:`FLOOD_RECORDS` records of
one message template the rest only counted (:func:`suppressed_summary` says how many at the end),
so a file with thousands of odd names cannot flood or hang the terminal.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections import Counter
from collections.abc import Iterator
from typing import TextIO

from codedag.util.text import printable, redact_uri

_HANDLER_NAME = "codedag-cli"
MAX_MESSAGE_CHARS = 2000
FLOOD_RECORDS = 20


class BoundedRecords(logging.Filter):
    """Escapes and cuts each record's message; drops repeats of a template past a count."""

    def __init__(self, repeats: int = FLOOD_RECORDS) -> None:
        super().__init__()
        self.repeats = repeats
        self.seen: Counter[tuple[str, str]] = Counter()
        self.dropped: Counter[tuple[str, str]] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        template = (record.name, str(record.msg)[:200])
        self.seen[template] += 1
        if self.seen[template] > self.repeats and record.levelno < logging.ERROR:
            self.dropped[template] += 1
            return False
        try:
            message = redact_uri(record.getMessage())
        except Exception:  # a bad format: let logging report it as usual
            return True
        lines = message[: MAX_MESSAGE_CHARS + 1].split("\n")
        text = "\n".join(printable(line, None) for line in lines)
        cut = len(message) - MAX_MESSAGE_CHARS
        if cut > 0:
            text = f"{text[:MAX_MESSAGE_CHARS]}... ({cut:,} more characters)"
        record.msg, record.args = text, None
        return True

    def summary(self) -> str | None:
        """One line counting the records dropped as repeats, or ``None``."""
        if not self.dropped:
            return None
        total = sum(self.dropped.values())
        (_name, template), _count = self.dropped.most_common(1)[0]
        return (
            f"{total:,} more log message(s) like {printable(template, 80)!r} were not shown "
            f"(after {self.repeats} of each kind)"
        )


@contextlib.contextmanager
def _random_untouched() -> Iterator[None]:
    """Put Python's global random state back after the block: importing rich draws a number from
    it (``rich.style``), and the first record a training process logs would shift every random
    draw the script makes after it (a data set's flips, a model's dropout)."""
    import random

    from codedag.util.import_draws import own_imports

    state = random.getstate()
    try:
        with own_imports():
            yield
    finally:
        random.setstate(state)


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
    with _random_untouched():  # rich.style draws its style ids' start from Python's random
        from rich.console import Console
        from rich.highlighter import NullHighlighter
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
        highlighter=NullHighlighter(),  # its regular expressions take minutes on long lines
    )
    handler.addFilter(BoundedRecords())
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


def suppressed_summary(name: str = "codedag") -> str | None:
    """The CLI handler's count of log records it did not show (repeats), or ``None``."""
    for handler in logging.getLogger(name).handlers:
        if handler.get_name() == _HANDLER_NAME:
            for found in handler.filters:
                if isinstance(found, BoundedRecords):
                    return found.summary()
    return None

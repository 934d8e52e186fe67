"""The ``codedag`` command: a thin dispatcher over one module per subcommand.

Each subcommand module defines ``register(subparsers)`` (argument parsing only, no heavy imports)
and ``run(args) -> int``. Bad input of any kind becomes one line on stderr and exit code 2: argument
errors, codedag's own errors (``CodeDAGError``), and operating-system errors on a named file. Ctrl-C,
SIGTERM and SIGHUP raise ``KeyboardInterrupt`` in the command, so it saves what it measured and ends
its processes; the exit code is 130, or 128 + the signal number. Anything else is a bug in codedag
and keeps its traceback.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import signal
import sys
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING, NoReturn

from codedag.errors import CodeDAGError
from codedag.util.text import redact_uri
from codedag.version import __version__

if TYPE_CHECKING:
    from codedag.util.logs import BoundedRecords

# Subcommand modules under codedag.cli, in the order --help lists them.
SUBCOMMANDS: tuple[str, ...] = (
    "demo",
    "doctor",
    "trace",
    "calibrate",
    "tune",
    "optimize",
    "plan",
    "plans",
    "cache",
    "experiment",
    "env",
    "migrate",
    "run",
    "profile",
    "mutate",
    "results",
    "report",
)

log = logging.getLogger("codedag.cli")


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors are one line on stderr, pointing at ``--help``, and exit 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {one_line(message)} (see: {self.prog} --help)\n")


def one_line(message: object) -> str:
    """A message on one line: continuation lines joined (after a colon with a space, else '; ')."""
    lines = [line.strip() for line in str(message).splitlines() if line.strip()]
    if not lines:
        return ""
    text = lines[0]
    for line in lines[1:]:
        text += (" " if text.endswith(":") else "; ") + line
    return text


def common_options(top_level: bool = False) -> argparse.ArgumentParser:
    """Options every subcommand accepts: -v/--verbose and -q/--quiet.

    Subcommands use suppressed defaults so that ``codedag -v doctor`` keeps the top-level value.
    """
    parent = argparse.ArgumentParser(add_help=False)
    group = parent.add_argument_group("output")
    verbose_default = 0 if top_level else argparse.SUPPRESS
    quiet_default = False if top_level else argparse.SUPPRESS
    group.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=verbose_default,
        help="more log output (repeatable)",
    )
    group.add_argument(
        "-q", "--quiet", action="store_true", default=quiet_default, help="only warnings and errors"
    )
    return parent


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """Build the parser with every subcommand registered, or only ``only`` (one of
    :data:`SUBCOMMANDS`): the command line names it, so the others' modules stay unimported."""
    parser = _Parser(
        prog="codedag",
        description=(
            "Trace a training data pipeline into a DAG, move its CPU-heavy preprocessing onto "
            "the GPU, and measure what that changes."
        ),
        parents=[common_options(top_level=True)],
    )
    parser.add_argument("--version", action="version", version=f"codedag {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    subparsers.required = True
    parent = common_options()
    names = SUBCOMMANDS if only is None or only not in SUBCOMMANDS else (only,)
    for name in names:
        module = importlib.import_module(f"codedag.cli.{name.replace('-', '_')}")
        module.register(subparsers, parent)
    return parser


def named_command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names, or None: its first word that is no option (the top-level
    options take no value), when that is one of :data:`SUBCOMMANDS` and no top-level ``--help``
    (which lists them all) comes first."""
    for word in argv:
        if word in ("--", "-h", "--help"):
            return None
        if not word.startswith("-"):
            return word if word in SUBCOMMANDS else None
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser(named_command(sys.argv[1:] if argv is None else argv))
    args = parser.parse_args(argv)
    _FirstRecord.install(-1 if args.quiet else args.verbose)
    from codedag.util.signals import Terminated, interrupt_on_signals, interrupted_by

    try:
        with interrupt_on_signals():
            code = int(args.handler(args) or 0)
        signum = interrupted_by()
        if code == 0 and signum is not None:  # a library swallowed the interruption
            raise Terminated(signum) if signum != signal.SIGINT else KeyboardInterrupt
        _report_suppressed()
        return code
    except CodeDAGError as error:
        print(f"codedag {args.command}: error: {redact_uri(one_line(error))}", file=sys.stderr)
        if args.verbose:
            log.exception("details")
        return 2
    except Terminated as stop:
        print(f"codedag {args.command}: interrupted by {stop.signal_name}", file=sys.stderr)
        return stop.exit_code
    except KeyboardInterrupt:
        print(f"codedag {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0
    except OSError as error:
        if error.filename is None:
            raise  # not about a file the user named: a bug, keep the traceback
        where = (
            error.filename if error.filename2 is None else f"{error.filename} -> {error.filename2}"
        )
        reason = error.strerror or type(error).__name__
        print(f"codedag {args.command}: error: {where}: {reason}", file=sys.stderr)
        return 2


class _FirstRecord(logging.Handler):
    """Stands in for the CLI's log handler (:func:`~codedag.util.logs.setup_logging`) until the
    first record reaches it, then installs that handler and hands it the record: a command that
    logs nothing (``codedag run`` of a script that plans nothing) never imports rich."""

    def __init__(self, verbosity: int) -> None:
        super().__init__()
        self.verbosity = verbosity
        self.stream = sys.stderr  # the stream of now: a script may replace sys.stderr later
        self._handler: logging.Handler | None = None
        self._bounded: BoundedRecords | None = None  # for records written before the handler

    @classmethod
    def install(cls, verbosity: int) -> None:
        """Put a stand-in in place of the CLI's handler, with the level and propagation that
        ``setup_logging`` gives the ``codedag`` logger."""
        from codedag.devices.distributed import distributed_rank
        from codedag.util.logs import _HANDLER_NAME, level_for

        logger = logging.getLogger("codedag")
        for old in list(logger.handlers):
            if old.get_name() == _HANDLER_NAME:
                logger.removeHandler(old)
        stand_in = cls(verbosity)
        stand_in.set_name(_HANDLER_NAME)  # setup_logging replaces it as its own
        logger.addHandler(stand_in)
        logger.propagate = False
        logger.setLevel(level_for(verbosity) if distributed_rank()[0] == 0 else logging.ERROR)

    def emit(self, record: logging.LogRecord) -> None:
        if self._handler is None and not _may_import_rich():
            self._plain(record)
            return
        if self._handler is None:  # Handler.handle holds this handler's lock
            from codedag.util.logs import _HANDLER_NAME, setup_logging

            logger = logging.getLogger("codedag")
            level = logger.level  # as the command set it since (codedag run: WARNING)
            try:
                setup_logging(self.verbosity, self.stream)
            except Exception:  # a closed stream, as a handler's emit would meet it
                self.handleError(record)
                return
            finally:
                logger.setLevel(level)
            self._handler = next(h for h in logger.handlers if h.get_name() == _HANDLER_NAME)
        self._handler.handle(record)

    def _plain(self, record: logging.LogRecord) -> None:
        """Write ``record`` as the rich handler would, in plain text (its level, its message),
        bounded and masked as that handler's records are."""
        from codedag.util.logs import BoundedRecords

        if self._bounded is None:
            self._bounded = BoundedRecords()
        try:
            if not self._bounded.filter(record):  # a repeat past the flood limit
                return
            self.stream.write(f"{record.levelname:<8} {record.getMessage()}\n")
            self.stream.flush()
        except Exception:  # a closed stream, a bad format: as a handler's emit would meet them
            self.handleError(record)


def _may_import_rich() -> bool:
    """Whether the first record may import rich here: only on the main thread. Importing it
    draws from Python's global random state, which the main thread puts back at once; from
    another thread (the prefix cache's writer, in a DataLoader worker or in the script's
    process) the draw and its putting back would land between the loading thread's own draws
    and shift them (a flip, a crop), so such a record is written plainly until then."""
    return "rich.style" in sys.modules or threading.current_thread() is threading.main_thread()


def _report_suppressed() -> None:
    from codedag.util.logs import suppressed_summary

    summary = suppressed_summary()
    if summary is not None:
        log.warning("%s", summary)


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

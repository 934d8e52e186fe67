"""The ``codedag`` command: a thin dispatcher over one module per subcommand.

Each subcommand module defines ``register(subparsers)`` (argument parsing only, no heavy imports)
and ``run(args) -> int``. Errors of codedag's own hierarchy become one line and exit code 2.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Sequence

from codedag import __version__
from codedag.errors import CodeDAGError

# Subcommand modules under codedag.cli, in the order --help lists them.
SUBCOMMANDS: tuple[str, ...] = (
    "demo",
    "doctor",
    "trace",
    "calibrate",
    "optimize",
    "plan",
    "experiment",
    "env",
    "migrate",
    "profile",
    "mutate",
    "results",
    "report",
)

log = logging.getLogger("codedag.cli")


class _Parser(argparse.ArgumentParser):
    """ArgumentParser whose errors print the usage line and exit 2 (argparse's own convention)."""


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


def build_parser() -> argparse.ArgumentParser:
    """Build the full parser with every subcommand registered."""
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
    for name in SUBCOMMANDS:
        module = importlib.import_module(f"codedag.cli.{name.replace('-', '_')}")
        module.register(subparsers, parent)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    from codedag.util.logs import setup_logging

    setup_logging(-1 if args.quiet else args.verbose)
    try:
        return int(args.handler(args) or 0)
    except CodeDAGError as error:
        print(f"codedag {args.command}: error: {error}", file=sys.stderr)
        if args.verbose:
            log.exception("details")
        return 2
    except KeyboardInterrupt:
        print(f"codedag {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader (e.g. `| head`) went away: stop quietly, as Unix tools do.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())

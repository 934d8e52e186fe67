"""Argument types: numbers finite and in range, paths never empty, with a message that says why.

``type=integer(min_value=1)`` or ``type=number(above=0)`` makes argparse reject ``nan``, ``inf``,
``-1`` or ``2**70`` with one line naming the flag, the bound and, where a bound protects the
machine, the reason. ``type=nonempty_path`` rejects an empty path, which ``Path("")`` would
silently turn into the current folder.
"""

from __future__ import annotations

import argparse
import math
import operator
from collections.abc import Callable
from pathlib import Path
from typing import Any

from codedag.errors import UsageError

SEED_MAX = 2**32 - 1  # NumPy's legacy seeding takes 32-bit seeds


_HOLDS = {">": operator.gt, ">=": operator.ge, "<=": operator.le}


def _check_range(
    value: float,
    shown: str,
    low: float | None,
    high: float | None,
    above: float | None,
    reason: str,
) -> None:
    """Refuse ``value`` beyond a bound: one line with the bounds, ``shown`` and ``reason``."""
    bounds = [(op, b) for op, b in ((">", above), (">=", low), ("<=", high)) if b is not None]
    if all(_HOLDS[op](value, b) for op, b in bounds):
        return
    text = " and ".join(f"{op} {b if isinstance(b, int) else f'{b:g}'}" for op, b in bounds)
    why = f" ({reason})" if reason else ""
    raise argparse.ArgumentTypeError(f"must be {text}, got {shown}{why}")


def integer(
    min_value: int | None = None, max_value: int | None = None, reason: str = ""
) -> Callable[[str], int]:
    """An argparse type: a whole number in ``[min_value, max_value]`` (either may be open)."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip(), 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        _check_range(value, str(value), min_value, max_value, None, reason)
        return value

    parse.__name__ = "integer"
    return parse


def number(
    min_value: float | None = None,
    max_value: float | None = None,
    *,
    above: float | None = None,
    reason: str = "",
) -> Callable[[str], float]:
    """An argparse type: a finite float, ``> above`` and within ``[min_value, max_value]``."""

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
        _check_range(value, text, min_value, max_value, above, reason)
        return value

    parse.__name__ = "number"
    return parse


def nonempty_path(text: str) -> Path:
    """An argparse type: a non-empty path (``Path("")`` would mean the current folder)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty string")
    return Path(text)


NON_NEGATIVE_NUMBER = number(0)
SEED = integer(0, SEED_MAX, "seeds are 32-bit")


_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}


def byte_size(text: str) -> int:
    """A size such as ``512M``, ``2G``, ``1.5GiB`` or ``1000000`` (bytes) for argparse.

    Raises:
        argparse.ArgumentTypeError: anything else, or a negative size.
    """
    import re

    match = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGT]?)(?:i?B)?\s*", text, re.IGNORECASE)
    if match is None:
        raise argparse.ArgumentTypeError(f"expected a size such as 512M or 2G, got {text!r}")
    value = float(match.group(1)) * _UNITS[match.group(2).upper()]
    if not value < 2**62:
        raise argparse.ArgumentTypeError(f"size {text!r} is too large")
    return int(value)


def folder_action(
    action: argparse.ArgumentParser,
    flag: str,
    folder_help: str,
    handler: Callable[[argparse.Namespace], int],
) -> None:
    """The options every action of a cache folder's subcommand takes (``cache``, ``plans``): the
    folder (``flag`` or ``--dir``, into ``args.folder``) and ``--json``; ``handler`` runs it."""
    action.add_argument(flag, "--dir", dest="folder", default=None, metavar="DIR", help=folder_help)
    action.add_argument("--json", action="store_true", help="print JSON")
    action.set_defaults(handler=handler)


def loader_source(parser: argparse.ArgumentParser, target_help: str, dataloader_help: str) -> None:
    """TARGET or ``--dataloader MODULE:FACTORY``: where a command (``trace``, ``tune``) gets
    its pipeline; :func:`check_loader_source` asks for exactly one."""
    parser.add_argument("target", nargs="?", help=target_help)
    parser.add_argument("--dataloader", metavar="MODULE:FACTORY", help=dataloader_help)


FIRST_EPOCH_CHOICES = ("all", "auto", "paced")
"""``--first-epoch``'s values (:data:`codedag.plan.cache.FirstEpoch`, not imported here: the
command line starts without pydantic)."""


def first_epoch_flag(parser: Any, default_help: str) -> None:
    """``--first-epoch all|auto|paced`` (default ``all``): how the prefix cache's first epoch
    stores values; ``default_help`` says what ``all`` means to the command."""
    parser.add_argument(
        "--first-epoch",
        choices=FIRST_EPOCH_CHOICES,
        default="all",
        help=f"how the prefix cache's first epoch stores values: all (the default: {default_help}), "
        "auto (paced where storing every value would slow the first epoch by more than 3 %%: it "
        "stores what fits in 3 %% of the loading time, the next epoch the rest) or paced (always; "
        "docs/cache.md)",
    )


def check_loader_source(args: argparse.Namespace) -> None:
    """Refuse arguments of :func:`loader_source` that give both TARGET and ``--dataloader``,
    or neither."""
    if bool(args.target) == bool(args.dataloader):
        raise UsageError("give exactly one of TARGET or --dataloader MODULE:FACTORY")


def subcommand_defaults(
    register: Callable[[argparse._SubParsersAction, argparse.ArgumentParser], None],
    argv: list[str],
) -> argparse.Namespace:
    """The arguments a subcommand parses from ``argv`` (its name first), every other flag at
    its default: one command runs another's steps with that command's own defaults.

    Args:
        register: the subcommand module's ``register(subparsers, parent)``.
        argv: e.g. ``["trace", "--dataloader", "pkg.data:make", "--out", "out"]``.
    """
    parser = argparse.ArgumentParser(add_help=False)
    register(parser.add_subparsers(), argparse.ArgumentParser(add_help=False))
    return parser.parse_args(argv)

"""Moved to :mod:`codedag.backends.probe`; this old path re-exports its names and warns once."""

from codedag.backends.probe import migrated_call, original_function
from codedag.util.moved import warn_moved

__all__ = ["migrated_call", "original_function"]

warn_moved("codedag.migrate.probe", "codedag.backends.probe")

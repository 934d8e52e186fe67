"""Moved to :mod:`codedag.backends.registry`; this old path re-exports its names and warns once."""

from codedag.backends.registry import *  # noqa: F403
from codedag.backends.registry import __all__ as __all__
from codedag.util.moved import warn_moved

warn_moved("codedag.migrate.registry", "codedag.backends.registry")

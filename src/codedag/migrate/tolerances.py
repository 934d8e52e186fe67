"""Moved to :mod:`codedag.backends.tolerances`; this old path re-exports its names and warns
once."""

from codedag.backends.tolerances import *  # noqa: F403
from codedag.backends.tolerances import __all__ as __all__
from codedag.util.moved import warn_moved

warn_moved("codedag.migrate.tolerances", "codedag.backends.tolerances")

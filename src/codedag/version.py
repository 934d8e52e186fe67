"""codedag's version (one place: the package root, the CLI and every written file read it here)."""

__version__ = "0.1.0"

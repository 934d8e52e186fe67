"""codedag's version (one place: the package root, the CLI and every written file read it here),
and the installed version of any other distribution."""

__version__ = "0.1.0"


def distribution_version(distribution: str) -> str | None:
    """The installed version of ``distribution`` (None: not installed)."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None

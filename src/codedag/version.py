"""codedag's version (one place: the package root, the CLI and every written file read it here),
and the installed version of any other distribution."""

import functools

__version__ = "0.1.0"


@functools.cache
def distribution_version(distribution: str) -> str | None:
    """The installed version of ``distribution`` (None: not installed), looked up once per
    process: each lookup scans the import path's package metadata (1-5 ms), and the plan's key,
    the prefix cache's keys and the calibrations all ask for the same libraries."""
    from importlib import metadata

    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None

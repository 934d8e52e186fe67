"""Output paths checked before any work: a run never fails at its end because of where it writes.

Both checks look at the path and write (then remove) one probe file in the nearest existing
folder, so an unwritable place (a read-only mount, ``/proc``, a folder of another user) is found
up front; nothing is created when a check fails.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from codedag.errors import ConfigError


def _nearest_existing(path: Path) -> Path:
    current = path
    while not current.exists() and current != current.parent:
        current = current.parent
    return current


def _check_creatable(folder: Path, flag: str, target: Path) -> None:
    """``folder`` exists or can be created, and files can be written where it will be."""
    base = _nearest_existing(folder.absolute())
    if not base.is_dir():
        raise ConfigError(f"{flag} {target}: {base} is a file, so no folder can be made under it")
    try:
        fd, probe = tempfile.mkstemp(prefix=".codedag-write-test-", dir=base)
        os.close(fd)
        os.unlink(probe)
    except OSError as error:
        raise ConfigError(f"cannot write into {flag} {target}: {base}: {error.strerror}") from None


def check_output_dir(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """Check that ``path`` is, or can become, a writable folder; returns it as a Path.

    Raises:
        ConfigError: ``path`` is a file, lies under a file, or cannot be written.
    """
    target = Path(path)
    if target.exists() and not target.is_dir():
        raise ConfigError(f"{flag} {target} is a file; expected a folder")
    _check_creatable(target, flag, target)
    return target


def check_output_file(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """Check that a file can be written (atomically, by rename) at ``path``; returns it.

    Raises:
        ConfigError: ``path`` is a folder or a special file (device, pipe), its folder is a
            file, or the folder cannot be written.
    """
    text = os.fspath(path)
    target = Path(text)
    if text.endswith(("/", os.sep)) or target.is_dir():
        raise ConfigError(f"{flag} {target} is a folder; expected a file name")
    if target.exists() and not target.is_file():
        raise ConfigError(f"{flag} {target} exists and is not a regular file (a device or pipe)")
    _check_creatable(target.parent, flag, target)
    return target

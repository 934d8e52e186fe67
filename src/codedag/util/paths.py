"""Output paths checked before any work: a run never fails at its end because of where it writes.

Both checks look at the path and write (then remove) one probe file in the nearest existing
folder, so an unwritable place (a read-only mount, ``/proc``, a folder of another user) is found
up front; nothing is created when a check fails. An empty path is refused (``Path("")`` would be
the current folder). :func:`output_lock` keeps two runs from writing into one folder at once.
:func:`user_cache_dir` is where codedag keeps what only saves time (calibrations, plans, the
prefix cache).
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

from codedag.errors import ConfigError
from codedag.util.io import open_no_follow, write_error

CACHE_DIR_ENV = "CODEDAG_CACHE_DIR"


def user_cache_dir() -> Path:
    """``$CODEDAG_CACHE_DIR``, else the platform's user cache directory for codedag."""
    override = os.environ.get(CACHE_DIR_ENV, "").strip()
    if override:
        return Path(override)
    import platformdirs

    return Path(platformdirs.user_cache_dir("codedag"))


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


def _refuse_empty(path: str | os.PathLike[str], flag: str) -> None:
    """An empty name would mean the current folder (``Path("")`` is ``.``): say so instead."""
    if not os.fspath(path).strip():
        raise ConfigError(f"{flag} is empty; expected a path (use . for the current folder)")


def check_output_dir(path: str | os.PathLike[str], flag: str = "--out") -> Path:
    """Check that ``path`` is, or can become, a writable folder; returns it as a Path.

    Raises:
        ConfigError: ``path`` is a file, lies under a file, or cannot be written.
    """
    _refuse_empty(path, flag)
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
    _refuse_empty(path, flag)
    text = os.fspath(path)
    target = Path(text)
    if text.endswith(("/", os.sep)) or target.is_dir():
        raise ConfigError(f"{flag} {target} is a folder; expected a file name")
    if target.exists() and not target.is_file():
        raise ConfigError(f"{flag} {target} exists and is not a regular file (a device or pipe)")
    _check_creatable(target.parent, flag, target)
    return target


LOCK_FILE = ".codedag.lock"


@contextlib.contextmanager
def output_lock(folder: str | os.PathLike[str], flag: str = "--out") -> Iterator[Path]:
    """Hold ``folder`` for this run: a second run writing there meanwhile is refused.

    The lock is an advisory ``flock`` on ``folder/.codedag.lock`` (released by the system when
    the process ends, however it ends); the file says which process holds it. A folder this
    run created is removed again when the run leaves it empty. A lock file that is a symbolic or
    hard link is refused (the pid written into it would land in another file).

    Raises:
        ConfigError: another process holds the folder.
        WriteError: the lock file cannot be written or is a link (its target is untouched).
    """
    target = Path(folder)
    lock = target / LOCK_FILE
    try:
        import fcntl
    except ImportError:  # not POSIX: no lock
        yield target
        return
    created = not target.exists()
    try:
        target.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise write_error(lock, error) from error
    fd = open_no_follow(lock, os.O_RDWR | os.O_CREAT)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "another process"
            raise ConfigError(
                f"{flag} {target} is in use by another codedag run ({holder}); wait for it to "
                "end or choose another folder"
            ) from None
        with contextlib.suppress(OSError):  # who holds it is a courtesy: a full disk is no reason
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}".encode(), 0)
        yield target
    finally:
        if created:  # a run that wrote nothing leaves no folder behind
            with contextlib.suppress(OSError):
                lock.unlink()
                target.rmdir()
        os.close(fd)  # releases the lock

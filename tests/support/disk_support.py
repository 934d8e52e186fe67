"""A folder on a full disk, for the tests of what codedag does when a write fails.

Where the machine allows it (root, and ``mount`` works here) the folder is a 64 KiB tmpfs mounted
for the test and filled up, so every write fails the way a real full disk fails. Elsewhere the
writes codedag makes through :mod:`codedag.util.io` go to ``/dev/full``, which fails every write
with the same ``ENOSPC``.
"""

from __future__ import annotations

import contextlib
import errno
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

KEPT = b"written before the disk filled up\n"


def _mount_tmpfs(folder: Path) -> bool:
    if os.geteuid() != 0:
        return False
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(folder)],
        capture_output=True,
        check=False,
    )
    return done.returncode == 0


def _fill(folder: Path) -> None:
    """Write until the filesystem refuses: nothing is left for the command under test."""
    with open(folder / ".filler", "wb", buffering=0) as handle:
        try:
            while True:
                handle.write(b"\0" * 4096)
        except OSError as error:
            assert error.errno == errno.ENOSPC, error


@contextlib.contextmanager
def full_disk(base: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A folder where every new byte fails with ENOSPC; it holds ``kept.txt`` (:data:`KEPT`),
    written before the disk filled up."""
    folder = base / "full"
    folder.mkdir()
    mounted = _mount_tmpfs(folder)
    try:
        (folder / "kept.txt").write_bytes(KEPT)
        if mounted:
            _fill(folder)
        else:
            import codedag.util.io as io

            real = tempfile.mkstemp

            def to_dev_full(*args: object, **kwargs: object) -> tuple[int, str]:
                fd, name = real(*args, **kwargs)  # type: ignore[call-overload]
                os.close(fd)
                return os.open("/dev/full", os.O_WRONLY), name

            monkeypatch.setattr(io.tempfile, "mkstemp", to_dev_full)
        yield folder
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], check=False)


def leftovers(folder: Path) -> list[Path]:
    """Temporary files a failed write left behind (none is expected)."""
    return [p for p in folder.rglob("*") if p.name.endswith(".tmp")]

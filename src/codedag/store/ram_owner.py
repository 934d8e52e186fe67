"""Which cache folder a RAM tier belongs to, and removing RAM tiers whose folder is gone.

A RAM tier lives in shared memory (``/dev/shm/codedag-prefix-UID-TAG``) until ``codedag cache
clear`` or a reboot, so that the next run with the same cache folder reads it back. Once that
folder is deleted (a temporary folder, ``rm -rf`` of the cache), no run can reach its RAM tier
again, but its pages still count as the container's shared memory, which DataLoader workers need
for their batches.

So each process that opens a RAM tier writes the cache folder's path into the tier's ``owner``
file and holds a shared ``flock`` on it until it closes the store (DataLoader workers forked
meanwhile hold it with it). When a run starts, every RAM tier of the
same user whose owner folder no longer exists is removed, unless a process still holds its lock.
A tier without an ``owner`` file (one written before this file existed) is left alone.

A RAM tier also records which key its values are tagged with (``key``: a digest of the cache
folder's secret key, never the key). A cache folder deleted and made again under the same path
gets a new key while its RAM tier stays: none of the tier's values could verify, and the entries
already there would stop the new run from storing its own. Such a tier is removed when a run
opens it (:func:`bind_key`), unless a process still uses it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import shutil
import stat
from pathlib import Path

from codedag.errors import WriteError
from codedag.util.io import open_no_follow

try:
    import fcntl
except ImportError:  # pragma: no cover - no flock (and no /dev/shm) on Windows
    fcntl = None  # type: ignore[assignment]

log = logging.getLogger(__name__)

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)

OWNER_FILE = "owner"
KEY_FILE = "key"
PREFIX = "codedag-prefix-"

_HELD: dict[Path, int] = {}
"""RAM tier folder -> the descriptor whose shared lock this process holds."""


def claim(ram: Path, folder: Path) -> None:
    """Record ``folder`` as the owner of the RAM tier ``ram`` and hold its lock (once per
    process; a tier or folder that cannot be written is left as it is). The tier's folder is
    made, private, when the tier opens (:func:`.trust.prepare`), never here."""
    if fcntl is None or ram in _HELD:
        return
    owner = str(Path(folder).absolute())
    path = ram / OWNER_FILE
    try:
        Path(folder).mkdir(parents=True, exist_ok=True)  # the owner exists while a run uses it
        if path.is_symlink() or not path.exists() or path.read_text(encoding="utf-8") != owner:
            _write_owner(path, owner)
        descriptor = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except (OSError, WriteError) as error:
        log.debug("prefix cache: the RAM tier %s keeps no owner (%s)", ram, error)
        return
    try:
        fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:  # another process is removing it right now: the run will make it again
        os.close(descriptor)
        return
    _HELD[ram] = descriptor


def _write_owner(path: Path, owner: str) -> None:
    """Write the owner (or key) file, never through a link planted in its place."""
    descriptor = open_no_follow(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(owner)


def key_digest(secret: bytes) -> str:
    """What a RAM tier records of the key its values are tagged with: a keyed digest that tells
    keys apart without revealing them."""
    return hashlib.blake2b(b"codedag RAM tier", key=secret[:64], digest_size=16).hexdigest()


def record_key(ram: Path, digest: str) -> None:
    """Record in the opened RAM tier ``ram`` that its values are tagged with the key of
    ``digest`` (a tier that cannot be written is left as it is)."""
    if _recorded_key(ram) != digest:
        with contextlib.suppress(OSError, WriteError):
            _write_owner(ram / KEY_FILE, digest)


def _recorded_key(ram: Path) -> str | None:
    """The key digest ``ram`` records (None: no key file, or one that is not a regular file)."""
    try:
        descriptor = os.open(ram / KEY_FILE, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return None
    try:
        return os.read(descriptor, 256).decode("ascii", "replace")
    finally:
        os.close(descriptor)


def _only_files_named(ram: Path, names: frozenset[str]) -> bool:
    """Whether ``ram`` holds regular files of these names only (no link, no folder)."""
    try:
        with os.scandir(ram) as entries:
            return all(e.name in names and e.is_file(follow_symlinks=False) for e in entries)
    except OSError:
        return False


def bind_key(ram: Path, digest: str, tier_files: frozenset[str]) -> bool:
    """Make the RAM tier ``ram`` one whose values are tagged with the key of ``digest``.

    A tier that records another key, or that holds values and records none, is removed first
    (only this user's own tier folder holding ``tier_files`` only, never through a link), unless
    a process still holds it. A folder holding anything else is left for opening to refuse.
    :func:`record_key` writes the digest once the tier has opened.

    Returns:
        False when the tier holds another key's values and a running process still uses them:
        this process must not use the tier.
    """
    if fcntl is None:
        return True
    try:
        info = os.lstat(ram)
    except OSError:
        return True  # no tier yet
    if (
        not stat.S_ISDIR(info.st_mode)
        or info.st_uid != os.getuid()
        or not _only_files_named(ram, tier_files)
    ):
        return True  # no tier of this user's: opening it is refused, with the reason
    recorded = _recorded_key(ram)
    if recorded == digest:
        return True
    if recorded is None and not (ram / "data.mdb").exists():
        return True  # nothing stored yet
    if ram in _HELD:
        return False  # this process opened it under another key (its folder was made again)
    descriptor = _owned_owner_file(ram)
    if descriptor is not None:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a process of the folder's earlier life still uses it
            os.close(descriptor)
            return False
    try:
        shutil.rmtree(ram, ignore_errors=True)
    finally:
        if descriptor is not None:
            with contextlib.suppress(OSError):
                os.close(descriptor)
    log.info(
        "prefix cache: removed the RAM tier %s, whose values were tagged with another key", ram
    )
    return not ram.exists()


def release(ram: Path) -> None:
    """Let go of the lock :func:`claim` took on ``ram`` (the store is closed)."""
    descriptor = _HELD.pop(ram, None)
    if descriptor is not None:
        with contextlib.suppress(OSError):
            os.close(descriptor)


def _owned_owner_file(ram: Path) -> int | None:
    """A descriptor of the owner file of ``ram`` when both are this user's own, a real folder
    and a regular file (no link followed), else None (no owner recorded, or removed meanwhile)."""
    try:
        info = os.lstat(ram)
        if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
            return None
        descriptor = os.open(ram / OWNER_FILE, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return None
    info = os.fstat(descriptor)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.getuid():
        os.close(descriptor)
        return None
    return descriptor


def sweep(shm: Path, uid: int, keep: Path | None = None) -> int:
    """Remove ``uid``'s RAM tiers in ``shm`` whose owner folder no longer exists and that no
    process holds (only folders and owner files this user owns, never through a link); returns
    the bytes of shared memory freed."""
    if fcntl is None:
        return 0
    from codedag.devices.memory import allocated_bytes

    freed = removed = 0
    for ram in shm.glob(f"{PREFIX}{uid}-*"):
        if ram == keep or ram in _HELD:
            continue
        descriptor = _owned_owner_file(ram)
        if descriptor is None:
            continue
        try:
            owner = Path(os.read(descriptor, 1 << 16).decode("utf-8"))
        except (OSError, UnicodeDecodeError):
            owner = Path()
        if not owner.is_absolute() or owner.exists():
            os.close(descriptor)
            continue
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a process still uses it
            os.close(descriptor)
            continue
        try:
            size = allocated_bytes(ram)
            shutil.rmtree(ram, ignore_errors=True)
            if not ram.exists():
                freed, removed = freed + size, removed + 1
        finally:
            with contextlib.suppress(OSError):
                os.close(descriptor)
    if removed:
        log.info(
            "prefix cache: removed %d RAM tier(s) whose cache folder no longer exists "
            "(%.1f MB of shared memory freed)",
            removed,
            freed / 1e6,
        )
    return freed

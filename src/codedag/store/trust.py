"""What the prefix cache trusts of its files: who owns them, who may read them, their size, its key.

A tier's folder (the RAM tier's in the shared ``/dev/shm``, under a name anyone can predict) is
a trust boundary: it holds decoded samples, and what is read from it reaches user code.

* **Modes and owners.** A tier's folder is made exclusively with mode 0700 and its files with
  0600. Before LMDB opens it, the folder (opened without following a link) and every file in it
  must belong to this user and give nothing to group or others, and none may be a link: a
  folder another user made first, a link, or one anyone else may use is refused (the tier is
  off; the run goes on with the other tier or without the cache).
* **Key.** Every value is stored with a keyed hash (a 128-bit xxh3 keyed by the store's secret) of its key, header and bytes,
  under a secret key kept in a 0600 file of the cache folder (:func:`secret`): a value the cache
  did not write itself never verifies, whatever checksum it carries.
* **Place.** A tier on a network filesystem (NFS, SMB, Lustre, ...) is refused: LMDB's locks
  do not reach the processes of other machines there (:mod:`.network_fs`).
* **Size.** A store file shorter than its LMDB meta pages say (cut short between runs) would kill
  the process with SIGBUS on the first read past its end; it is removed before it is mapped
  (:func:`short_store`), and the tier starts empty.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import stat
import struct
from pathlib import Path

from codedag.store.network_fs import network_filesystem

log = logging.getLogger(__name__)

SECRET_FILE = "secret.key"
SECRET_BYTES = 32
STORE_FILES = ("data.mdb", "lock.mdb")
_SHARED_BITS = 0o077
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)  # a pipe planted at a name must not hang its open
_CHECKED = hasattr(os, "getuid") and _NOFOLLOW != 0
"""Owners and modes are POSIX's: elsewhere folders are made without checks."""


class Refused(OSError):
    """A folder or file the cache does not use (the reason is the message)."""


def prepare(path: Path, kind: str) -> None:
    """Make the tier folder ``path`` (mode 0700) or check the one there, and remove a store file
    cut short (one warning).

    Raises:
        Refused: the folder lies on a network filesystem (:mod:`.network_fs`), or it or a file in
            it is a link, another user's, or open to others.
        OSError: the folder cannot be made or read.
    """
    shared = network_filesystem(path)
    if shared:
        raise Refused(
            f"its folder is on a network filesystem ({shared}), where LMDB's locks do not hold: "
            "set $CODEDAG_PREFIX_CACHE_DIR to a folder on a local disk"
        )
    path.parent.mkdir(parents=True, exist_ok=True)
    with contextlib.suppress(FileExistsError):
        os.mkdir(path, 0o700)
    if not _CHECKED:
        return
    folder = open_own_folder(path)
    try:
        _check_owned(os.fstat(folder), "its folder")
        for name in os.listdir(folder):
            _check_entry(folder, name)
        problem = short_store(path / STORE_FILES[0])
        if problem:
            log.warning(
                "prefix cache: the %s tier at %s %s; it was removed and starts empty",
                kind,
                path,
                problem,
            )
            for name in STORE_FILES:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=folder)
    finally:
        os.close(folder)


def open_own_folder(path: Path, what: str = "its folder") -> int:
    """A descriptor of the folder ``path`` (not through a link), once it is this user's.

    Raises:
        Refused: ``path`` is a link, not a folder, or another user's (``what`` names it).
        OSError: it cannot be opened (absent, say).
    """
    try:
        folder = os.open(path, os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            raise Refused(f"{what} is a link or not a folder ({path})") from error
        raise
    try:
        check_owner(os.fstat(folder), what)
    except BaseException:
        os.close(folder)
        raise
    return folder


def check_owner(info: os.stat_result, what: str) -> None:
    """Refuse what ``info`` describes unless this user owns it (no check where there are no
    POSIX owners).

    Raises:
        Refused: another user's (``what`` names it in the message).
    """
    if _CHECKED and info.st_uid != os.getuid():
        raise Refused(f"{what} belongs to uid {info.st_uid}, not to this user ({os.getuid()})")


def read_own_file(
    path: str | os.PathLike[str], limit: int, folder: int | None = None
) -> tuple[bytes, os.stat_result]:
    """The bytes of ``path`` (relative to the folder descriptor ``folder`` when given): not
    through a link, a regular file this user owns, at most ``limit`` bytes.

    Raises:
        Refused: a symbolic link, not a regular file, another user's, or larger than ``limit``.
        OSError: it cannot be opened (absent, say).
    """
    try:
        descriptor = os.open(path, os.O_RDONLY | _NOFOLLOW | _NONBLOCK, dir_fd=folder)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise Refused("a symbolic link (never read through one)") from None
        raise
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise Refused("not a regular file")
        check_owner(info, "the file")
        if info.st_size > limit:
            raise Refused(f"larger than {limit >> 20} MiB")
        return os.read(descriptor, limit + 1), info
    finally:
        os.close(descriptor)


def _check_owned(info: os.stat_result, what: str) -> None:
    check_owner(info, what)
    if info.st_mode & _SHARED_BITS:
        raise Refused(
            f"{what} has mode {stat.S_IMODE(info.st_mode):04o}: group or others may use it "
            "(a tier's folder must be 0700, its files 0600; `codedag cache clear` removes a "
            "store an earlier version left open)"
        )


def _check_entry(folder: int, name: str) -> None:
    info = os.stat(name, dir_fd=folder, follow_symlinks=False)
    if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
        raise Refused(f"{name!r} in its folder is a link or not a file of its own")
    _check_owned(info, repr(name))


# LMDB's data file starts with two meta pages (mdb.c, 64-bit builds): a 16-byte page header,
# then MDB_meta: mm_magic u32, mm_version u32, mm_address, mm_mapsize, mm_dbs[2] (48 bytes each;
# the first one's md_pad u32 holds the page size), mm_last_pg, mm_txnid.
_PAGE_HEADER_BYTES = 16
_META = struct.Struct("<IIQQI")  # magic, version, address, map size, page size (mm_dbs[0])
_LAST = struct.Struct("<QQ")  # last page used, transaction id
_LAST_OFFSET = 120
_META_BYTES = _PAGE_HEADER_BYTES + _LAST_OFFSET + _LAST.size
_MAGIC = 0xBEEFC0DE
_MAGIC_BYTES = struct.pack("<I", _MAGIC)


def short_store(path: Path) -> str:
    """Why the LMDB data file ``path`` is shorter than its meta pages say it is, else ``""``
    (fine, absent, empty, or no LMDB file: LMDB itself then says so, without mapping it)."""
    if struct.calcsize("P") != 8:  # the layout above is a 64-bit build's
        return ""
    try:
        descriptor = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError:
        return ""
    try:
        first = os.pread(descriptor, _META_BYTES, 0)
        if first[_PAGE_HEADER_BYTES : _PAGE_HEADER_BYTES + 4] != _MAGIC_BYTES:
            return ""  # empty (LMDB makes it anew), or no LMDB file
        if len(first) < _META_BYTES:
            return f"was cut short: {len(first)} bytes, fewer than a meta page"
        page_bytes = _META.unpack_from(first, _PAGE_HEADER_BYTES)[4]
        if page_bytes < 512 or page_bytes & (page_bytes - 1):
            return ""
        second = os.pread(descriptor, _META_BYTES, page_bytes)
        # The size after the meta pages: another process committing meanwhile (a worker storing
        # while this one opens the tier) grows the file before it writes a meta page, so a size
        # read first could be older than the pages they name.
        size_bytes = os.fstat(descriptor).st_size
    finally:
        os.close(descriptor)
    if len(second) < _META_BYTES:
        return f"was cut short: {size_bytes} bytes, fewer than its two meta pages"
    last_page = max(
        _LAST.unpack_from(meta, _PAGE_HEADER_BYTES + _LAST_OFFSET)[0]
        for meta in (first, second)
        if _META.unpack_from(meta, _PAGE_HEADER_BYTES)[0] == _MAGIC
    )
    need_bytes = (last_page + 1) * page_bytes
    if size_bytes < need_bytes:
        return f"was cut short: {size_bytes} bytes, its pages need {need_bytes}"
    return ""


def secret(folder: Path) -> bytes:
    """The cache folder's secret key: read from its ``secret.key`` file (0600, this user's, not
    a link), made there on first use.

    Raises:
        Refused: the file is a link, another user's, open to others, or not a key.
        OSError: it cannot be made or read.
    """
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = folder / SECRET_FILE
    try:
        return _read_secret(path)
    except FileNotFoundError:
        _write_secret(path)
    return _read_secret(path)


def _read_secret(path: Path) -> bytes:
    try:
        descriptor = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError as error:
        if error.errno == errno.ELOOP:
            raise Refused(f"its key file {path} is a link") from error
        raise
    try:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise Refused(f"its key file {path} is not a file")
        if _CHECKED:
            _check_owned(info, f"its key file {path}")
        key = os.read(descriptor, SECRET_BYTES + 1)
    finally:
        os.close(descriptor)
    if len(key) != SECRET_BYTES:
        raise Refused(f"its key file {path} holds {len(key)} bytes, not {SECRET_BYTES}")
    return key


def _write_secret(path: Path) -> None:
    """Write a new key whole under another name, then link it in: a process reading the key
    meanwhile finds none or all of it, and of two processes making one, the first wins."""
    draft = path.with_name(f".{path.name}.{os.getpid()}.{id(path):x}")
    descriptor = os.open(draft, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o600)
    try:
        try:
            os.write(descriptor, os.urandom(SECRET_BYTES))
        finally:
            os.close(descriptor)
        with contextlib.suppress(FileExistsError):
            os.link(draft, path)
    finally:
        os.unlink(draft)

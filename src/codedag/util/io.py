"""Files in and out: atomic writes, and the one checked JSON reader for every file codedag reads.

Writes go through a temporary file in the same folder and a rename, so a reader never sees half a
file and a crash never destroys the old one. No file is written through a symbolic link: a link
where codedag would write (planted in a shared folder, it would point the write at another file) is
refused with :func:`link_error` and its target is left as it is (:func:`open_no_follow` for files
opened in place: locks, logs, streams; :func:`exclusive_lock` for a lock between processes;
:func:`atomic_write_with` for a library that writes a file by name; :func:`own_file` before one
that opens a database by name). :func:`read_json` reads DAGs, plans, results and configs with the
same guarantees against bad or hostile input: a size cap on the raw bytes and on what a ``.gz``
file inflates to, strict UTF-8, a nesting-depth cap checked before the JSON parser recurses, and
one error naming the file and the problem (``SchemaError`` for data files, ``ConfigError`` for
configs).
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
import tempfile
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from codedag.errors import ConfigError, SchemaError, WriteError
from codedag.util.text import printable

MAX_INPUT_ENV = "CODEDAG_MAX_INPUT_MB"
DEFAULT_MAX_BYTES = 256 * 2**20  # plans, results, configs
DAG_MAX_BYTES = 1024 * 2**20  # traced DAGs of ~10^6 nodes fit
MAX_JSON_DEPTH = 100  # codedag's formats nest fewer than 10 levels
_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK_BYTES = 1 << 20
_NOT_STRUCTURE = bytes(b for b in range(256) if b not in b'[]{}"')


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename.

    Raises:
        WriteError: ``path`` is a symbolic link (its target is untouched), or the disk is full,
            over quota, read-only or otherwise refuses the write; the old file (if any) is intact
            and the temporary file is removed.
    """

    def fill(fd: int, _draft: Path) -> None:
        with os.fdopen(fd, "wb", closefd=False) as handle:
            handle.write(data)

    return _replace_with_draft(path, fill)


def atomic_write_with(path: str | os.PathLike[str], write: Callable[[Path], object]) -> Path:
    """Let a library that writes files by name (a profiler's trace export, a copy, an audio
    encoder) write ``path`` atomically: ``write`` gets a new temporary file in the same folder
    (made by codedag, never a link) and fills it; that file then replaces ``path``.

    Raises:
        WriteError: as :func:`atomic_write_bytes`; an error of ``write`` itself propagates, with
            the temporary file removed.
    """
    return _replace_with_draft(path, lambda _fd, draft: write(draft))


def _replace_with_draft(path: str | os.PathLike[str], fill: Callable[[int, Path], object]) -> Path:
    """Make a temporary file beside ``path``, ``fill`` it (its descriptor and name), sync it and
    rename it over ``path``; a link at ``path`` is refused first."""
    target = Path(path)
    if target.is_symlink():  # the rename would not follow it, but nor may it replace it
        raise link_error(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        # mkstemp creates with O_EXCL | O_NOFOLLOW: a name planted in advance is never opened
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    except OSError as error:
        raise write_error(target, error) from error
    try:
        try:
            fill(fd, Path(tmp))
            os.fsync(fd)  # the same file, also when a library wrote it by name
        finally:
            os.close(fd)
        # mkstemp creates 0600; give the file the permissions a plain open() would.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException as error:
        with contextlib.suppress(OSError):
            Path(tmp).unlink(missing_ok=True)
        if isinstance(error, OSError):
            raise write_error(target, error) from error
        raise
    return target


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def link_error(target: str | os.PathLike[str]) -> WriteError:
    """One line for a symbolic link found where codedag writes a file."""
    return WriteError(
        f"refusing to write {printable(os.fspath(target), 200)}: it is a symbolic link "
        "(codedag writes no file through a link; its target is untouched; remove the link or "
        "choose another folder)"
    )


def open_no_follow(path: str | os.PathLike[str], flags: int, mode: int = 0o666) -> int:
    """``os.open`` of a file codedag writes in place (a lock, a log, a stream), never through a
    link; returns the descriptor.

    A symbolic link at ``path`` is refused by the kernel (``O_NOFOLLOW``), and so is anything but
    a regular file with one name: a hard link to another file would make a truncation or a
    write land in that file. ``O_TRUNC`` is applied only once these checks passed.

    Raises:
        WriteError: ``path`` is a link, a hard-linked file or not a regular file (nothing was
            written), or the system refuses the open.
    """
    target = os.fspath(path)
    try:
        # O_NONBLOCK: a pipe planted at ``path`` must not hang the open before it is refused
        fd = os.open(target, (flags & ~os.O_TRUNC) | _NOFOLLOW | _CLOEXEC | _NONBLOCK, mode)
    except OSError as error:
        if os.path.islink(target):
            raise link_error(target) from None
        raise write_error(target, error) from error
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
            what = "has other names (hard links)" if info.st_nlink > 1 else "is no regular file"
            raise WriteError(
                f"refusing to write {printable(target, 200)}: it {what}; codedag writes only "
                "files of its own (remove it or choose another folder)"
            )
        if _NONBLOCK:
            os.set_blocking(fd, True)
        if flags & os.O_TRUNC:
            os.ftruncate(fd, 0)
    except BaseException as error:
        os.close(fd)
        if isinstance(error, OSError):
            raise write_error(target, error) from error
        raise
    return fd


@contextlib.contextmanager
def exclusive_lock(path: str | os.PathLike[str], required: bool = True) -> Iterator[bool]:
    """Hold an exclusive ``flock`` on ``path`` (made if missing, never through a link) while the
    block runs, waiting for another process that holds it; yields whether it is held.

    Args:
        path: the lock file; its folder is made (private) when missing.
        required: raise when the lock cannot be taken; False runs the block unlocked instead
            (a read-only folder, a file system without locks, a system without ``flock``).

    Raises:
        WriteError: ``required`` and the lock file cannot be made or is a link.
    """
    try:
        import fcntl
    except ImportError:  # not POSIX: no cross-process lock
        yield False
        return
    try:
        Path(path).parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as error:
        if required:
            raise write_error(path, error) from error
    try:
        fd = open_no_follow(path, os.O_RDWR | os.O_CREAT, 0o600)
    except WriteError:
        if required:
            raise
        yield False
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # ENOLCK: a file system without locks
            if required:
                raise
            yield False
            return
        yield True
    finally:
        os.close(fd)  # releases the lock


def own_file(path: str | os.PathLike[str]) -> Path:
    """Make sure ``path`` is a regular file with one name, not a link (made empty when absent),
    before a library that opens it by name writes it in place (SQLite's database file).

    Raises:
        WriteError: as :func:`open_no_follow` (nothing was written).
    """
    os.close(open_no_follow(path, os.O_RDONLY | os.O_CREAT))
    return Path(path)


def write_error(target: str | os.PathLike[str], error: OSError) -> WriteError:
    """One line for a failed write: the file, the system's reason, and that nothing was lost."""
    reason = error.strerror or str(error) or type(error).__name__
    full = error.errno in (errno.ENOSPC, errno.EDQUOT)
    hint = "; free some space and run again" if full else ""
    return WriteError(
        f"cannot write {printable(os.fspath(target), 200)}: {reason}{hint} "
        "(files already written are intact)"
    )


def atomic_save_figure(fig: Any, path: str | os.PathLike[str], **options: Any) -> Path:
    """Render a matplotlib figure to PNG in memory and write it atomically (``options``:
    ``savefig``'s, e.g. ``dpi``).

    Raises:
        WriteError: as :func:`atomic_write_bytes`.
    """
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", **options)
    return atomic_write_bytes(path, buffer.getvalue())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 ``text`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: object, indent: int | None = 2) -> Path:
    """Serialize ``obj`` as JSON and write it atomically (NaN is refused: it is not JSON)."""
    text = json.dumps(obj, indent=indent, allow_nan=False, default=_json_default)
    return atomic_write_text(path, text + "\n")


def _json_default(obj: object) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return obj.tolist()
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    raise TypeError(f"cannot serialize {type(obj).__name__} to JSON")


# --------------------------------------------------------------------------- reading


def input_limit_bytes(default: int = DEFAULT_MAX_BYTES) -> int:
    """The size cap of an input file: ``CODEDAG_MAX_INPUT_MB`` when set, else ``default``.

    Raises:
        ConfigError: the variable is set to something other than a positive number.
    """
    text = os.environ.get(MAX_INPUT_ENV, "").strip()
    if not text:
        return default
    try:
        megabytes = float(text)
    except ValueError:
        megabytes = float("nan")
    if not megabytes > 0 or megabytes == float("inf"):
        raise ConfigError(f"{MAX_INPUT_ENV}={text!r}: expected a positive number of megabytes")
    return int(megabytes * 2**20)


def _mb(n_bytes: int) -> str:
    return f"{n_bytes / 2**20:.0f} MiB"


def _read_capped(path: Path, what: str, limit: int, error: type[ConfigError]) -> bytes:
    try:
        info = path.stat()
    except FileNotFoundError:
        raise error(f"cannot read {what} {path}: no such file") from None
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror}") from e
    if stat.S_ISDIR(info.st_mode):
        raise error(f"{what} {path} is a folder; expected a file")
    if not stat.S_ISREG(info.st_mode):
        raise error(f"{what} {path} is not a regular file (a device, pipe or socket)")
    too_big = f"{what} {path} is larger than {_mb(limit)}; set {MAX_INPUT_ENV} to read it"
    if info.st_size > limit:
        raise error(too_big)
    try:
        with open(path, "rb") as handle:
            raw = handle.read(limit + 1)
    except OSError as e:
        raise error(f"cannot read {what} {path}: {e.strerror}") from e
    if len(raw) > limit:  # grew while we read it
        raise error(too_big)
    return raw


def gunzip_capped(
    data: bytes, limit: int, where: str, error: type[ConfigError] = SchemaError
) -> bytes:
    """Inflate gzip ``data`` (several members allowed), refusing more than ``limit`` bytes.

    Output is kept while it is small; past ``_KEEP_BYTES`` the rest is only counted, and the data
    is inflated a second time once it is known to fit, so a compression bomb costs time up to
    the cap but never memory.

    Raises:
        ``error``: corrupt or truncated gzip data, or more than ``limit`` bytes inflated.
    """
    kept = _inflate(data, limit, where, error, keep_bytes=_KEEP_BYTES)
    if kept is None:  # large but within the cap: inflate again, keeping everything
        kept = _inflate(data, limit, where, error, keep_bytes=limit)
    assert kept is not None
    return kept


_KEEP_BYTES = 64 * 2**20


def _inflate(
    data: bytes, limit: int, where: str, error: type[ConfigError], keep_bytes: int
) -> bytes | None:
    """The inflated bytes, or None when they exceed ``keep_bytes`` (but not ``limit``)."""
    chunks: list[bytes] | None = []
    total = 0
    rest = data
    while rest:
        inflater = zlib.decompressobj(16 + zlib.MAX_WBITS)
        pending = rest
        try:
            while pending:
                chunk = inflater.decompress(pending, _CHUNK_BYTES)
                total += len(chunk)
                if total > limit:
                    raise error(
                        f"{where} inflates to more than {_mb(limit)} (a compression bomb?); "
                        f"set {MAX_INPUT_ENV} to read it"
                    )
                if chunks is not None:
                    chunks.append(chunk)
                    if total > keep_bytes:
                        chunks = None  # count the rest only
                pending = inflater.unconsumed_tail
                if inflater.eof:
                    break
        except zlib.error as e:
            raise error(f"{where}: corrupt gzip data ({e})") from e
        if not inflater.eof:
            raise error(f"{where}: truncated gzip data")
        rest = inflater.unused_data
        if rest and not rest.startswith(_GZIP_MAGIC):
            raise error(f"{where}: unexpected bytes after the gzip data")
    return None if chunks is None else b"".join(chunks)


def json_depth(data: bytes, stop_above: int | None = None) -> int:
    """Deepest nesting of arrays and objects in JSON ``data`` (brackets in strings ignored).

    Linear in the size and never recursive, so it can run before a recursive parser. With
    ``stop_above``, data with at most that many opening brackets is not scanned: the count is
    returned instead, an upper bound of the depth that is enough to accept it.
    """
    opens = data.count(b"[") + data.count(b"{")
    if stop_above is not None and opens <= stop_above:
        return opens  # an upper bound, enough to accept
    if not opens:
        return 0
    import numpy as np

    if b"\\" in data:
        # Escapes pair up left to right: drop escaped backslashes first, then escaped quotes;
        # what remains (\n, \u...) cannot open or close anything.
        data = data.replace(b"\\\\", b"").replace(b'\\"', b"")
    skeleton = data.translate(None, _NOT_STRUCTURE)  # quotes and brackets only: small
    if not skeleton:
        return 0
    codes = np.frombuffer(skeleton, dtype=np.uint8)
    quote = codes == ord('"')
    # Unescaped quotes alternate open/close: a bracket after an odd number of them is in a string.
    outside = ~quote & (np.bitwise_xor.accumulate(quote.view(np.uint8)) == 0)
    brackets = codes[outside]
    if not brackets.size:
        return 0
    steps = np.where((brackets == ord("[")) | (brackets == ord("{")), 1, -1).astype(np.int32)
    return int(np.cumsum(steps, dtype=np.int64).max())


def parse_json_bytes(
    data: bytes,
    where: str,
    *,
    max_depth: int = MAX_JSON_DEPTH,
    error: type[ConfigError] = SchemaError,
) -> Any:
    """Decode UTF-8 ``data`` (a BOM is allowed) and parse it as JSON, with a depth cap.

    Raises:
        ``error``: not UTF-8, nested deeper than ``max_depth``, or not JSON.
    """
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        bad = data[e.start : e.start + 1].hex()
        raise error(f"{where} is not UTF-8 text (byte 0x{bad} at offset {e.start})") from None
    if json_depth(data, stop_above=max_depth) > max_depth:
        raise error(f"{where}: JSON nested deeper than {max_depth} levels")
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise error(f"{where} is not JSON: {e.msg} at line {e.lineno} column {e.colno}") from None
    except RecursionError:  # pragma: no cover - the depth check comes first
        raise error(f"{where}: JSON nested too deeply") from None
    except ValueError as e:  # e.g. an integer with more digits than Python converts
        raise error(f"{where} is not JSON: {e}") from None


def read_json(
    path: str | os.PathLike[str],
    what: str = "file",
    max_bytes: int | None = None,
    *,
    expect: type | None = None,
    max_depth: int = MAX_JSON_DEPTH,
    error: type[ConfigError] = SchemaError,
) -> Any:
    """Read a JSON file (``.gz`` or plain, detected by content) that a user handed to codedag.

    Args:
        path: the file.
        what: what the file should be, for messages ("execution DAG", "models config").
        expect: the type the top level must have (``dict`` or ``list``), or None for any.
        max_bytes: cap on the raw size and on the inflated size of gzip data (default:
            ``CODEDAG_MAX_INPUT_MB`` or 256 MiB).
        max_depth: deepest nesting of arrays and objects accepted.
        error: the error class raised (``SchemaError`` for data files, ``ConfigError`` for
            configs).

    Returns:
        The parsed JSON value.

    Raises:
        ``error``: with one line naming the file and what is wrong with it.
    """
    source = Path(path)
    limit = max_bytes if max_bytes is not None else input_limit_bytes()
    raw = _read_capped(source, what, limit, error)
    where = f"{what} {source}"
    if raw.startswith(_GZIP_MAGIC):
        raw = gunzip_capped(raw, limit, where, error)
    data = parse_json_bytes(raw, where, max_depth=max_depth, error=error)
    if expect is not None and not isinstance(data, expect):
        raise error(
            f"{where}: expected a JSON {_json_type_name(expect)}, got {_json_type_name(type(data))}"
        )
    return data


def _json_type_name(kind: type) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", type(None): "null"}
    if kind in (int, float):
        return "number"
    return names.get(kind, kind.__name__)

"""Atomic file writes: a reader never sees half a file, and a crash never destroys the old one."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Write ``data`` to ``path`` through a temporary file in the same folder and a rename."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        # mkstemp creates 0600; give the file the permissions a plain open() would.
        os.chmod(tmp, 0o666 & ~_umask())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return target


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write UTF-8 ``text`` atomically."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: str | os.PathLike[str], obj: Any, indent: int | None = 2) -> Path:
    """Serialize ``obj`` as JSON and write it atomically (NaN is refused: it is not JSON)."""
    text = json.dumps(obj, indent=indent, allow_nan=False, default=_json_default)
    return atomic_write_text(path, text + "\n")


def _json_default(obj: Any) -> Any:
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "tolist"):  # numpy scalars and arrays
        return obj.tolist()
    if isinstance(obj, set | frozenset):
        return sorted(obj)
    raise TypeError(f"cannot serialize {type(obj).__name__} to JSON")


MAX_JSON_BYTES = 1 << 30
"""Largest JSON document (after decompression) read from a file: 1 GiB."""


def read_json(
    path: str | os.PathLike[str], what: str = "file", max_bytes: int = MAX_JSON_BYTES
) -> Any:
    """Read a JSON (or gzip-compressed ``.gz`` JSON) file written by codedag or a user.

    Args:
        path: the file.
        what: what the file is, for messages (``"migration plan"``).
        max_bytes: refuse documents larger than this after decompression.

    Raises:
        SchemaError: missing or unreadable file, too large, not UTF-8, not JSON, nested too deeply.
    """
    import gzip

    from codedag.errors import SchemaError

    target = Path(path)
    try:
        if target.suffix == ".gz":
            with gzip.open(target, "rb") as handle:
                raw = handle.read(max_bytes + 1)
        else:
            with open(target, "rb") as handle:
                raw = handle.read(max_bytes + 1)
    except (OSError, EOFError) as e:
        reason = getattr(e, "strerror", None) or str(e)
        raise SchemaError(f"cannot read {what} {str(target)!r}: {reason}") from e
    if len(raw) > max_bytes:
        raise SchemaError(f"{what} {str(target)!r} is larger than {max_bytes} bytes")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise SchemaError(f"{what} {str(target)!r} is not UTF-8 text (byte {e.start})") from e
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(f"{what} {str(target)!r} is not JSON: {e.msg} at line {e.lineno}") from e
    except RecursionError as e:
        raise SchemaError(f"{what} {str(target)!r} is nested too deeply to be read") from e

"""The calibration cache: measured times per (device, library versions, function, signature).

One JSON file under the user's cache directory (``platformdirs``; ``CODEDAG_CACHE_DIR`` overrides
it), shared by every run on this machine. Entries are added as they are measured (each write is
atomic and taken under a file lock, so concurrent runs merge rather than overwrite one another).
A cache that cannot be read is set aside with a warning: it only ever saves time. An entry with a
NaN, infinite or negative figure (every figure is a time, a size or a count) is hostile input:
such entries are ignored with one warning, measured again, and dropped from the file at the next
write.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import os
from pathlib import Path
from typing import Any

from codedag.errors import CodeDAGError, WriteError
from codedag.util.io import atomic_write_json, exclusive_lock, read_json
from codedag.util.paths import user_cache_dir

log = logging.getLogger(__name__)

CACHE_SCHEMA_VERSION = 1
CACHE_FILE = "calibration.json"


def default_cache_path() -> Path:
    """``calibration.json`` in :func:`~codedag.util.paths.user_cache_dir`."""
    return user_cache_dir() / CACHE_FILE


def entry_key(device_name: str, versions: dict[str, str], function: str, signature: str) -> str:
    """The cache key of one measurement."""
    text = json.dumps([device_name, sorted(versions.items()), function, signature])
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


def sound_entry(value: object) -> bool:
    """No NaN, infinite or negative number anywhere in ``value`` (nested dicts and lists too)."""
    if isinstance(value, bool):
        return True
    if isinstance(value, int | float):
        return math.isfinite(value) and value >= 0
    if isinstance(value, dict):
        return all(sound_entry(v) for v in value.values())
    if isinstance(value, list):
        return all(sound_entry(v) for v in value)
    return True


class CalibrationCache:
    """Measurements by key, persisted in one file (or only in memory when ``path`` is None).

    Args:
        path: the cache file; ``None`` keeps measurements for this process only.
    """

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = Path(path) if path is not None else None
        self.entries: dict[str, dict[str, Any]] = {}
        self.hits = 0
        self.misses = 0
        if self.path is not None:
            self.entries = self._read(warn=True)

    @classmethod
    def default(cls) -> CalibrationCache:
        """The cache at :func:`default_cache_path`."""
        return cls(default_cache_path())

    def _read(self, warn: bool = False) -> dict[str, dict[str, Any]]:
        """The file's sound entries (``warn``: say how many were not)."""
        assert self.path is not None
        if not self.path.exists():
            return {}
        try:
            data = read_json(self.path, what="calibration cache")
        except CodeDAGError as e:
            return self._set_aside(str(e))
        if (
            not isinstance(data, dict)
            or data.get("schema_version") != CACHE_SCHEMA_VERSION
            or not isinstance(data.get("entries"), dict)
        ):
            return self._set_aside("unknown format or version")
        entries = {k: v for k, v in data["entries"].items() if isinstance(v, dict)}
        sound = {k: v for k, v in entries.items() if sound_entry(v)}
        if warn and len(sound) < len(entries):
            log.warning(
                "calibration cache %s: %d entr%s with NaN, infinite or negative figures "
                "ignored; measuring them again",
                self.path,
                len(entries) - len(sound),
                "y" if len(entries) - len(sound) == 1 else "ies",
            )
        return sound

    def _set_aside(self, reason: str) -> dict[str, dict[str, Any]]:
        assert self.path is not None
        aside = self.path.with_name(self.path.name + ".unreadable")
        with contextlib.suppress(OSError):
            os.replace(self.path, aside)
        log.warning("calibration cache %s set aside (%s); measuring again", self.path, reason)
        return {}

    def get(self, key: str) -> dict[str, Any] | None:
        """The entry of ``key``, counting hits and misses."""
        entry = self.entries.get(key)
        if entry is None:
            self.misses += 1
        else:
            self.hits += 1
        return entry

    def put(self, key: str, entry: dict[str, Any]) -> None:
        """Add a measurement and persist it (merged with what other runs wrote meanwhile)."""
        self.entries[key] = entry
        if self.path is None:
            return
        try:
            with exclusive_lock(self.path.with_suffix(".lock")):
                current = self._read() if self.path.exists() else {}
                current.update(self.entries)
                self.entries = current
                atomic_write_json(
                    self.path,
                    {"schema_version": CACHE_SCHEMA_VERSION, "entries": current},
                    indent=None,
                )
        except (OSError, WriteError) as e:  # the cache only saves time: measuring goes on
            log.warning("cannot write the calibration cache %s: %s", self.path, e)

    def clear(self) -> None:
        """Forget every measurement (and the file)."""
        self.entries = {}
        if self.path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()

"""Stream every raw sample of a long run to a CSV file, so memory stays bounded and nothing is lost.

The results JSON keeps downsampled series (enough for plots and summaries); the CSV files next to
it keep every batch, resource sample and logged metric. Writes are buffered by the file object and
flushed whenever the monitor flushes its JSON, so a crash loses at most one flush interval.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import TextIO

log = logging.getLogger(__name__)


class CsvSpill:
    """Append-only CSV writer; ``path=None`` makes every call a no-op.

    Thread-safe: the resource sampler writes from its own thread while the training thread flushes.
    """

    def __init__(self, path: str | os.PathLike[str] | None, header: str) -> None:
        self.path = Path(path) if path is not None else None
        self.header = header
        self.rows = 0
        self._fh: TextIO | None = None
        self._lock = threading.Lock()
        self._failed = False

    def _open(self) -> TextIO | None:
        if self.path is None or self._failed:
            return None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fresh = not self.path.exists() or self.path.stat().st_size == 0
            fh = open(self.path, "a", encoding="utf-8", buffering=1 << 16)  # noqa: SIM115
            if fresh:
                fh.write(self.header + "\n")
        except OSError as error:
            # Losing the raw stream must not stop training; the JSON keeps the downsampled series.
            log.warning(
                "cannot write raw samples to %s (%s); keeping summaries only", self.path, error
            )
            self._failed = True
            return None
        self._fh = fh
        return fh

    def write(self, line: str) -> None:
        """Append one CSV line (without the newline)."""
        if self.path is None:
            return
        with self._lock:
            fh = self._fh or self._open()
            if fh is not None:
                fh.write(line)
                fh.write("\n")
                self.rows += 1

    def flush(self) -> None:
        """Push buffered lines to the operating system."""
        with self._lock:
            if self._fh is not None:
                try:
                    self._fh.flush()
                except OSError as error:  # pragma: no cover - disk full etc.
                    log.warning("flushing %s failed: %s", self.path, error)

    def close(self) -> None:
        """Flush and close; a later ``write`` reopens in append mode."""
        with self._lock:
            if self._fh is not None:
                try:
                    self._fh.close()
                except OSError as error:  # pragma: no cover
                    log.warning("closing %s failed: %s", self.path, error)
                self._fh = None

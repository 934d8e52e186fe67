"""Stream every raw sample of a long run to a CSV file, so memory stays bounded and nothing is lost.

The results JSON keeps downsampled series (enough for plots and summaries); the CSV files next to
it keep every batch, resource sample and logged metric. Writes are buffered by the file object and
flushed whenever the monitor flushes its JSON, so a crash loses at most one flush interval.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from pathlib import Path
from typing import TextIO

from codedag.errors import WriteError
from codedag.util.io import open_no_follow

log = logging.getLogger(__name__)


class CsvSpill:
    """CSV writer of one stream; ``path=None`` makes every call a no-op.

    Its first write replaces a file an earlier run left at ``path``; after :meth:`close`, a
    write appends. A disk that fills up stops the stream with one warning, never the training.

    Thread-safe: the resource sampler writes from its own thread while the training thread flushes.
    """

    def __init__(self, path: str | os.PathLike[str] | None, header: str) -> None:
        self.path = Path(path) if path is not None else None
        self.header = header
        self.rows = 0
        self._fh: TextIO | None = None
        self._lock = threading.Lock()
        self._failed = False
        self._started = False

    def _open(self) -> TextIO | None:
        if self.path is None or self._failed:
            return None
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # The first open starts the file: a stream of an earlier run in the same folder is
            # replaced, never continued with this run's rows.
            fresh = not self._started or not self.path.exists() or self.path.stat().st_size == 0
            how = os.O_APPEND if self._started else os.O_TRUNC
            fd = open_no_follow(self.path, os.O_WRONLY | os.O_CREAT | how)  # never via a link
            fh = os.fdopen(fd, "a", encoding="utf-8", buffering=1 << 16)
            self._started = True
            if fresh:
                fh.write(self.header + "\n")
        except (OSError, WriteError) as error:
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
        self.write_lines([line])

    def write_lines(self, lines: list[str]) -> None:
        """Append several CSV lines (one lock, one write)."""
        if self.path is None or not lines:
            return
        with self._lock:
            fh = self._fh or self._open()
            if fh is None:
                return
            try:
                fh.write("\n".join(lines) + "\n")
            except OSError as error:  # a full disk: training goes on, the JSON keeps summaries
                self._give_up(error)
                return
            self.rows += len(lines)

    def _give_up(self, error: OSError) -> None:
        log.warning("cannot write raw samples to %s (%s); keeping summaries only", self.path, error)
        self._failed = True
        fh, self._fh = self._fh, None
        if fh is not None:
            with contextlib.suppress(OSError):
                fh.close()

    def flush(self) -> None:
        """Push buffered lines to the operating system."""
        with self._lock:
            if self._fh is not None:
                try:
                    self._fh.flush()
                except OSError as error:  # a full disk
                    self._give_up(error)

    def close(self) -> None:
        """Flush and close; a later ``write`` reopens in append mode."""
        with self._lock:
            if self._fh is not None:
                try:
                    self._fh.close()
                except OSError as error:  # pragma: no cover
                    log.warning("closing %s failed: %s", self.path, error)
                self._fh = None

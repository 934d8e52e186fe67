"""What one migration wrapper counts: migrated calls by match level and device, fallbacks and
their reasons (the first one logged), calls passed through to the original, nested calls."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from typing import Any

from codedag.errors import UnsupportedOperation
from codedag.migrate.proxy import Count

log = logging.getLogger("codedag.migrate.wrapper")  # a fallback is logged as the wrapper's

_MAX_REASONS = 20


class CallCounts:
    """The counters of one wrapped function.

    Args:
        name: the function's canonical name (for the log line of its first fallback).
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.passed = Count()
        self.nested = Count()
        self.fell_back = Count()
        self._reasons: Counter[str] = Counter()
        self._placements: dict[tuple[str, str], Count] = {}
        self._lock = threading.Lock()
        self._warned = False

    def placement(self, level: str, device: str) -> Count:
        """The counter of calls migrated at match ``level`` to ``device``."""
        counter = self._placements.get((level, device))
        if counter is None:
            with self._lock:
                counter = self._placements.setdefault((level, device), Count())
        return counter

    def record_fallback(self, error: Exception) -> None:
        """Count a fallback and its reason (the first one is logged)."""
        self.fell_back.add()
        reason = f"{type(error).__name__}: {error}"[:200]
        with self._lock:
            if reason in self._reasons or len(self._reasons) < _MAX_REASONS:
                self._reasons[reason] += 1
            else:
                self._reasons["(other reasons)"] += 1
            first = not self._warned
            self._warned = True
        if first:
            level = logging.INFO if isinstance(error, UnsupportedOperation) else logging.WARNING
            log.log(level, "%s: running the original (%s)", self.name, reason)

    def after_fork(self) -> None:
        """In a forked child: a fresh lock, and only the reasons of the child's own fallbacks."""
        self._lock = threading.Lock()  # another thread of the parent may have held it
        self._reasons = Counter()

    def counts(self) -> dict[str, int]:
        """The four counters, read without a lock (safe in a freshly forked child)."""
        migrated = sum(c.value for c in list(self._placements.values()))
        return {
            "migrated": migrated,
            "fell_back": self.fell_back.value,
            "passed_through": self.passed.value,
            "nested": self.nested.value,
        }

    def fallback_reasons(self) -> dict[str, int]:
        """Reason -> fallbacks counted in this process (in a forked child: since its fork)."""
        with self._lock:
            return dict(self._reasons)

    def by_placement(self) -> tuple[dict[str, int], dict[str, int], dict[str, int]]:
        """Migrated calls by match level and by device, and the fallbacks' reasons."""
        levels: Counter[str] = Counter()
        devices: Counter[str] = Counter()
        with self._lock:
            for (level, device), counter in list(self._placements.items()):
                count = counter.value
                levels[level] += count
                devices[device] += count
            reasons = dict(self._reasons)
        return dict(levels), dict(devices), reasons

    def stats(self, **more: Any) -> dict[str, Any]:
        """The counters as :meth:`~codedag.migrate.wrapper.UniversalWrapper.stats` reports
        them, ``more`` fields after the four counters."""
        levels, devices, reasons = self.by_placement()
        return {
            "migrated": sum(levels.values()),
            "fell_back": self.fell_back.value,
            "passed_through": self.passed.value,
            "nested": self.nested.value,
            **more,
            "fallback_reasons": reasons,
            "match_levels": levels,
            "devices": devices,
        }

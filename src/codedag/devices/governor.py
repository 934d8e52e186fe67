"""The CPU frequency governor: read it, tell whether it can be set here, and set it for a while."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

log = logging.getLogger(__name__)

CPU_ROOT = Path("/sys/devices/system/cpu")


@dataclass(frozen=True)
class GovernorStatus:
    """Governors in effect per policy, the ones available, and whether we may change them."""

    current: list[str]
    available: list[str]
    settable: bool
    detail: str
    files: list[str] = field(default_factory=list)

    @property
    def in_effect(self) -> str:
        """One word for results files: the governor, ``mixed``, or ``unavailable``."""
        if not self.current:
            return "unavailable"
        unique = sorted(set(self.current))
        return unique[0] if len(unique) == 1 else "mixed(" + ",".join(unique) + ")"


def governor_files(cpu_root: Path = CPU_ROOT) -> list[Path]:
    """``scaling_governor`` files of every CPU that has cpufreq."""
    if not cpu_root.is_dir():
        return []
    return sorted(cpu_root.glob("cpu[0-9]*/cpufreq/scaling_governor"))


def governor_status(cpu_root: Path = CPU_ROOT) -> GovernorStatus:
    """Read the governors; ``settable`` needs cpufreq files this process may write."""
    files = governor_files(cpu_root)
    if not files:
        return GovernorStatus(
            [], [], False, f"no cpufreq interface ({cpu_root}/cpu*/cpufreq missing)"
        )
    current = []
    for path in files:
        try:
            current.append(path.read_text().strip())
        except OSError:
            continue
    available_file = files[0].parent / "scaling_available_governors"
    try:
        available = available_file.read_text().split()
    except OSError:
        available = []
    writable = all(os.access(path, os.W_OK) for path in files)
    detail = (
        "cpufreq governors can be set"
        if writable
        else "cpufreq governors are read-only for this user (root is needed)"
    )
    return GovernorStatus(current, available, writable, detail, [str(p) for p in files])


UNAVAILABLE_NO_CPUFREQ = "unavailable: no cpufreq"


def check_governor(wanted: str | None, status: GovernorStatus) -> None:
    """Raise ConfigError when ``wanted`` is not one of the governors cpufreq offers here."""
    if wanted is not None and status.available and wanted not in status.available:
        from codedag.errors import ConfigError

        raise ConfigError(
            f"governor {wanted!r} is not offered here; available: {', '.join(status.available)}"
        )


@contextmanager
def governor_applied(wanted: str | None, cpu_root: Path = CPU_ROOT) -> Iterator[str]:
    """Set the cpufreq governor for the duration of a session and restore the previous ones.

    Yields the governor in effect, which the session records: ``wanted`` when it was set,
    otherwise what is in effect (``unavailable: no cpufreq`` without a cpufreq interface). When
    the governor cannot be set (no cpufreq, not permitted) a warning is logged and the session
    goes on.

    Raises:
        ConfigError: ``wanted`` is not one of the governors this machine offers.
    """
    status = governor_status(cpu_root)
    if not status.current:
        if wanted is not None:
            log.warning("cannot set governor %r: %s", wanted, status.detail)
        yield UNAVAILABLE_NO_CPUFREQ
        return
    if wanted is None:
        yield status.in_effect
        return
    check_governor(wanted, status)
    if not status.settable:
        log.warning(
            "cannot set governor %r: %s; recording %r", wanted, status.detail, status.in_effect
        )
        yield status.in_effect
        return
    previous = {Path(f): Path(f).read_text().strip() for f in status.files}
    try:
        for path in previous:
            path.write_text(wanted)
        log.info("CPU governor set to %s (was %s)", wanted, status.in_effect)
        yield wanted
    finally:
        for path, value in previous.items():
            try:
                path.write_text(value)
            except OSError as error:  # pragma: no cover - keep restoring the others
                log.error("could not restore governor %s in %s: %s", value, path, error)

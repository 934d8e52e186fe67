"""The CPU frequency governor: read it, and tell whether it can be set here."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

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

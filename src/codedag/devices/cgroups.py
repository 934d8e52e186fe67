"""Container CPU and memory from cgroups: v1, v2, or a hybrid of both.

psutil reports host-wide figures inside containers. The numbers that matter to a training job are
its cgroup's: the CPU quota (``cpu.max`` in v2, ``cpu.cfs_quota_us``/``cpu.cfs_period_us`` in v1),
the memory limit (``memory.max`` / ``memory.limit_in_bytes``), and the usage counters
(``cpu.stat`` usage_usec / ``cpuacct.usage`` in ns; ``memory.current`` / ``memory.usage_in_bytes``).

The process's cgroup is found from ``/proc/self/cgroup`` and the mount table
(``/proc/self/mountinfo``), so nested paths (``/sys/fs/cgroup/memory/<group>/...``) and hybrid
layouts (v1 controllers plus v2 at ``/sys/fs/cgroup/unified``) are read where they really are.
A limit set on a parent group applies too: the effective limit is the smallest along the path.
Every path is injectable, so tests run on fake trees.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from codedag.devices.cpus import usable_cpu_count

# v1 "unlimited" is PAGE_COUNTER_MAX rounded to the page size (9223372036854771712 on x86-64);
# anything this large means no limit.
UNLIMITED_THRESHOLD_BYTES = 1 << 62


@dataclass(frozen=True)
class CgroupPaths:
    """Where the process's cgroup files are: one folder per v1 controller, and the v2 folder."""

    version: str  # "v1", "v2", "hybrid" or "none"
    v1: dict[str, Path] = field(default_factory=dict)  # controller -> folder of this process
    v1_mounts: dict[str, Path] = field(default_factory=dict)  # controller -> mount point
    v2: Path | None = None
    v2_mount: Path | None = None


@dataclass(frozen=True)
class CpuLimit:
    """The CPU quota in CPUs (``None``: no quota) and where it came from."""

    cpus: float | None
    source: str


@dataclass(frozen=True)
class MemoryLimit:
    """The memory limit in bytes (``None``: no limit) and where it came from."""

    limit_bytes: int | None
    source: str


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _parse_mountinfo(text: str) -> list[tuple[str, Path, str, set[str]]]:
    """Cgroup mounts as ``(root, mount point, fstype, options)``."""
    mounts = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        if not sep:
            continue
        fields = left.split()
        fstype, _source, *rest = right.split()
        if fstype not in ("cgroup", "cgroup2") or len(fields) < 5:
            continue
        super_options = set(rest[0].split(",")) if rest else set()
        mounts.append((fields[3], Path(fields[4].replace("\\040", " ")), fstype, super_options))
    return mounts


def _join(mount: Path, mount_root: str, group: str) -> Path:
    """Folder of ``group`` under a mount whose root is ``mount_root`` (cgroup namespaces)."""
    if mount_root != "/" and (group == mount_root or group.startswith(mount_root + "/")):
        group = group[len(mount_root) :]
    candidate = mount / group.lstrip("/")
    return candidate if candidate.is_dir() else mount


def discover(proc_self: Path = Path("/proc/self")) -> CgroupPaths:
    """Find this process's cgroup folders from ``/proc/self/cgroup`` and ``mountinfo``."""
    membership = _read(proc_self / "cgroup") or ""
    mountinfo = _read(proc_self / "mountinfo") or ""
    mounts = _parse_mountinfo(mountinfo)
    groups_v1: dict[str, str] = {}
    group_v2: str | None = None
    for line in membership.splitlines():
        parts = line.split(":", 2)
        if len(parts) != 3:
            continue
        hierarchy, controllers, path = parts
        if hierarchy == "0" and controllers == "":
            group_v2 = path
        else:
            for controller in controllers.split(","):
                groups_v1[controller] = path
    v1: dict[str, Path] = {}
    v1_mounts: dict[str, Path] = {}
    v2 = v2_mount = None
    for root, mount, fstype, options in mounts:
        if fstype == "cgroup2":
            if v2_mount is None:
                v2_mount = mount
                v2 = _join(mount, root, group_v2 or "/")
            continue
        for controller in ("cpu", "cpuacct", "cpuset", "memory"):
            if controller in options and controller in groups_v1 and controller not in v1:
                v1[controller] = _join(mount, root, groups_v1[controller])
                v1_mounts[controller] = mount
    if v1 and v2 is not None:
        version = "hybrid"
    elif v1:
        version = "v1"
    elif v2 is not None:
        version = "v2"
    else:
        version = "none"
    return CgroupPaths(version, v1, v1_mounts, v2, v2_mount)


def _ancestors(folder: Path, mount: Path) -> list[Path]:
    """``folder`` and its parents up to and including ``mount``."""
    chain = [folder]
    current = folder
    while current != mount and mount in current.parents:
        current = current.parent
        chain.append(current)
    return chain


class CgroupReader:
    """Reads limits and usage counters of the process's cgroup; every method is cheap.

    Args:
        paths: the discovered folders; :func:`discover` by default.
    """

    def __init__(self, paths: CgroupPaths | None = None) -> None:
        self.paths = paths if paths is not None else discover()

    @property
    def version(self) -> str:
        """``v1``, ``v2``, ``hybrid`` or ``none``."""
        return self.paths.version

    def cpu_limit(self) -> CpuLimit:
        """The effective CPU quota: the smallest along the cgroup path; ``None`` without one."""
        best: tuple[float, str] | None = None
        folder = self.paths.v1.get("cpu")
        if folder is not None:
            for level in _ancestors(folder, self.paths.v1_mounts["cpu"]):
                quota = _read(level / "cpu.cfs_quota_us")
                period = _read(level / "cpu.cfs_period_us")
                if quota is None or period is None:
                    continue
                try:
                    quota_us, period_us = int(quota), int(period)
                except ValueError:
                    continue
                if quota_us > 0 and period_us > 0:
                    cpus = quota_us / period_us
                    if best is None or cpus < best[0]:
                        best = (cpus, str(level / "cpu.cfs_quota_us"))
        if best is None and self.paths.v2 is not None and self.paths.v2_mount is not None:
            for level in _ancestors(self.paths.v2, self.paths.v2_mount):
                text = _read(level / "cpu.max")
                if not text:
                    continue
                quota_text, _, period_text = text.partition(" ")
                if quota_text == "max":
                    continue
                try:
                    cpus = int(quota_text) / int(period_text or "100000")
                except (ValueError, ZeroDivisionError):
                    continue
                if best is None or cpus < best[0]:
                    best = (cpus, str(level / "cpu.max"))
        if best is None:
            return CpuLimit(None, self._no_limit_source("cpu"))
        return CpuLimit(best[0], best[1])

    def memory_limit(self) -> MemoryLimit:
        """The effective memory limit in bytes; ``None`` when unlimited (``max`` or ~2^63)."""
        best: tuple[int, str] | None = None
        candidates: list[Path] = []
        folder = self.paths.v1.get("memory")
        if folder is not None:
            candidates = [
                p / "memory.limit_in_bytes"
                for p in _ancestors(folder, self.paths.v1_mounts["memory"])
            ]
        elif self.paths.v2 is not None and self.paths.v2_mount is not None:
            candidates = [p / "memory.max" for p in _ancestors(self.paths.v2, self.paths.v2_mount)]
        for path in candidates:
            text = _read(path)
            if not text or text == "max":
                continue
            try:
                value = int(text)
            except ValueError:
                continue
            if value < UNLIMITED_THRESHOLD_BYTES and (best is None or value < best[0]):
                best = (value, str(path))
        if best is None:
            return MemoryLimit(None, self._no_limit_source("memory"))
        return MemoryLimit(best[0], best[1])

    def _no_limit_source(self, resource: str) -> str:
        if self.version == "none":
            return "no cgroup mounted"
        where = "v1" if resource in self.paths.v1 else "v2"
        if resource == "cpu":
            what = "cpu.cfs_quota_us = -1" if where == "v1" else "cpu.max = max"
        else:
            what = "memory.limit_in_bytes unlimited" if where == "v1" else "memory.max = max"
        return f"cgroup {where}: {what}"

    def cpu_usage_ns(self) -> int | None:
        """Cumulative CPU time of the cgroup in ns (v1 ``cpuacct.usage``, v2 ``usage_usec``)."""
        folder = self.paths.v1.get("cpuacct")
        if folder is not None:
            text = _read(folder / "cpuacct.usage")
            if text is not None and text.isdigit():
                return int(text)
        if self.paths.v2 is not None:
            text = _read(self.paths.v2 / "cpu.stat")
            if text:
                for line in text.splitlines():
                    key, _, value = line.partition(" ")
                    if key == "usage_usec" and value.strip().isdigit():
                        return int(value) * 1000
        return None

    def memory_usage_bytes(self) -> int | None:
        """Memory in use by the cgroup without reclaimable page cache (as ``docker stats``)."""
        folder = self.paths.v1.get("memory")
        if folder is not None:
            usage = _read(folder / "memory.usage_in_bytes")
            inactive = _stat_value(folder / "memory.stat", "total_inactive_file")
        elif self.paths.v2 is not None and _v2_has_file(self.paths.v2, "memory.current"):
            usage = _read(self.paths.v2 / "memory.current")
            inactive = _stat_value(self.paths.v2 / "memory.stat", "inactive_file")
        else:
            return None
        if usage is None or not usage.isdigit():
            return None
        return max(0, int(usage) - (inactive or 0))

    def cpuset_cpus(self) -> int | None:
        """Number of CPUs in the cgroup's cpuset, when one is readable."""
        candidates = []
        if "cpuset" in self.paths.v1:
            candidates.append(self.paths.v1["cpuset"] / "cpuset.effective_cpus")
            candidates.append(self.paths.v1["cpuset"] / "cpuset.cpus")
        if self.paths.v2 is not None:
            candidates.append(self.paths.v2 / "cpuset.cpus.effective")
        for path in candidates:
            text = _read(path)
            if text:
                return count_cpu_list(text)
        return None


def _v2_has_file(folder: Path, name: str) -> bool:
    return (folder / name).is_file()


def _stat_value(path: Path, key: str) -> int | None:
    text = _read(path)
    if not text:
        return None
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name == key and value.strip().isdigit():
            return int(value)
    return None


def count_cpu_list(text: str) -> int:
    """Count the CPUs of a cpuset list such as ``0-3,8,10-11``."""
    total = 0
    for part in text.replace("\n", ",").split(","):
        part = part.strip()
        if not part:
            continue
        low, _, high = part.partition("-")
        total += (int(high) - int(low) + 1) if high else 1
    return total


def container_cpus(reader: CgroupReader | None = None) -> tuple[float, str]:
    """CPUs this process may use: the smallest of its affinity, the cgroup's cpuset and its
    quota (fractional with a quota such as 1.5), and where that figure came from.

    Args:
        reader: the cgroup reader (tests pass one over a fake tree).
    """
    reader = reader if reader is not None else CgroupReader()
    usable = usable_cpu_count()
    cpus, source = float(usable), f"CPU affinity of this process ({usable} CPUs)"
    cpuset = reader.cpuset_cpus()
    if cpuset is not None and cpuset <= cpus:
        cpus, source = float(cpuset), f"cgroup cpuset ({cpuset} CPUs)"
    quota = reader.cpu_limit()
    if quota.cpus is not None and quota.cpus <= cpus:
        cpus, source = quota.cpus, f"cgroup CPU quota {quota.cpus:g} ({quota.source})"
    return cpus, source

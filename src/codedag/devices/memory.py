"""Memory facts for caches: what this process may use, where shared memory lives, free space.

A cache kept in RAM must fit in what the container may use (the cgroup limit when there is one,
else the machine's memory), and a RAM tier that DataLoader workers share lives in a memory-backed
filesystem (``/dev/shm`` on Linux), whose pages count against that limit as shared memory.
"""

from __future__ import annotations

import os
from pathlib import Path

SHM_FOLDERS: tuple[str, ...] = ("/dev/shm",)


def physical_memory_bytes() -> int:
    """The machine's memory in bytes (the host's, also inside a container)."""
    try:  # the kernel's count of pages, as /proc/meminfo's MemTotal: no psutil import to plan
        pages, page_bytes = os.sysconf("SC_PHYS_PAGES"), os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, OSError, ValueError):  # not POSIX
        pages = page_bytes = -1
    if pages > 0 and page_bytes > 0:
        return pages * page_bytes
    import psutil

    return int(psutil.virtual_memory().total)


def memory_limit_bytes() -> int:
    """The memory this process's container may use: the cgroup limit, else the machine's."""
    from codedag.devices.cgroups import CgroupReader

    physical = physical_memory_bytes()
    try:
        limit = CgroupReader().memory_limit().limit_bytes
    except OSError:
        limit = None
    return min(physical, limit) if limit else physical


def free_bytes(folder: str | os.PathLike[str]) -> int:
    """Bytes an unprivileged writer may still use on the filesystem holding ``folder``.

    The nearest existing ancestor is asked when ``folder`` does not exist yet; 0 when nothing
    can be asked.
    """
    path = Path(folder).absolute()
    while not path.exists() and path != path.parent:
        path = path.parent
    try:
        stats = os.statvfs(path)
    except OSError:
        return 0
    return int(stats.f_bavail * stats.f_frsize)


def shared_memory_folder() -> Path | None:
    """A writable memory-backed folder processes can share files in (``/dev/shm``), or None."""
    for name in SHM_FOLDERS:
        path = Path(name)
        if path.is_dir() and os.access(path, os.W_OK | os.X_OK) and free_bytes(path) > 0:
            return path
    return None


def allocated_bytes(path: str | os.PathLike[str]) -> int:
    """Bytes of storage a file (or every file under a folder) occupies: blocks, not its size.

    A sparse file reserved at its maximum size occupies only the pages written; in a
    memory-backed folder that is the memory it holds.
    """
    root = Path(path)
    if root.is_file():
        return root.stat().st_blocks * 512
    total = 0
    for dirpath, _dirs, files in os.walk(root):
        for name in files:
            try:
                total += os.stat(os.path.join(dirpath, name)).st_blocks * 512
            except OSError:
                continue
    return total

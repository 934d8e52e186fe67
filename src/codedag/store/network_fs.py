"""Whether a folder lies on a network or cluster filesystem, where LMDB is not safe.

LMDB coordinates its processes through a lock file it maps into memory and through ``flock``;
on NFS, SMB, Lustre, GPFS, CephFS and their kind, neither reaches the processes of another
machine (and ``flock`` and the mapped pages' coherence may fail even on one machine), so two
writers can corrupt the store. A disk tier there is switched off (:func:`.trust.prepare`).
"""

from __future__ import annotations

import os
from pathlib import Path

NETWORK_FILESYSTEMS = frozenset(
    {
        "nfs",
        "nfs4",
        "cifs",
        "smb3",
        "smbfs",
        "lustre",
        "gpfs",
        "ceph",
        "fuse.ceph",
        "glusterfs",
        "fuse.glusterfs",
        "beegfs",
        "fuse.sshfs",
        "9p",
        "afs",
        "ocfs2",
        "gfs2",
        "fuse.juicefs",
        "fuse.s3fs",
        "fuse.gcsfuse",
    }
)
"""Filesystem types (as ``/proc/self/mountinfo`` names them) whose files other machines share."""

MOUNTINFO = Path("/proc/self/mountinfo")


def _unescape(field: str) -> str:
    """A mount point as the kernel writes it (spaces, tabs, newlines, backslashes octal)."""
    for code, char in (("\\040", " "), ("\\011", "\t"), ("\\012", "\n"), ("\\134", "\\")):
        field = field.replace(code, char)
    return field


def filesystem_of(path: Path, mountinfo: str) -> tuple[str, str] | None:
    """``(type, mount point)`` of the mount holding ``path`` (absolute, links resolved) in the
    text of a ``mountinfo`` file, or None when no mount holds it."""
    target = str(path)
    found: tuple[int, str, str] | None = None
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if not sep or len(fields) < 5 or not right.split():
            continue
        mount = _unescape(fields[4])
        inside = target == mount or target.startswith(mount.rstrip("/") + "/")
        if inside and (found is None or len(mount) >= found[0]):  # a later mount hides one
            found = (len(mount), right.split()[0], mount)
    return None if found is None else (found[1], found[2])


def network_filesystem(path: Path) -> str:
    """``"TYPE at MOUNT"`` when ``path`` (or the nearest folder above it that exists) lies on a
    network or cluster filesystem, else ``""`` (also where mounts cannot be read)."""
    existing = Path(os.path.realpath(path))
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    remembered = (str(MOUNTINFO), str(existing))
    answer = _ANSWERS.get(remembered)
    if answer is not None:
        return answer
    try:
        text = MOUNTINFO.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    found = filesystem_of(existing, text)
    answer = (
        "" if found is None or found[0] not in NETWORK_FILESYSTEMS else f"{found[0]} at {found[1]}"
    )
    _ANSWERS[remembered] = answer
    return answer


_ANSWERS: dict[tuple[str, str], str] = {}
"""Each folder's answer, read from the mount table once per process and inherited by forked
DataLoader workers: reading and parsing the table took 1.5 ms per tier in every worker's first
batch (every epoch, where workers are not persistent). A folder that gets another filesystem
mounted over it while the process runs is not seen."""

"""Is this process in a container? Several independent signs, never ``/.dockerenv`` alone."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

_RUNTIME_MARKERS = (
    ("kubepods", "kubernetes"),
    ("docker", "docker"),
    ("containerd", "containerd"),
    ("libpod", "podman"),
    ("lxc", "lxc"),
)


@dataclass(frozen=True)
class ContainerInfo:
    """The verdict, the runtime when one can be named, and the evidence behind both."""

    in_container: bool
    runtime: str | None
    evidence: list[str] = field(default_factory=list)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def detect_container(
    root: Path = Path("/"), environ: dict[str, str] | None = None
) -> ContainerInfo:
    """Collect container evidence from marker files, cgroup names, the root mount and env vars.

    Args:
        root: filesystem root (a fake tree in tests).
        environ: environment to inspect; ``os.environ`` by default.
    """
    env = dict(os.environ) if environ is None else environ
    evidence: list[str] = []
    runtime: str | None = None
    if (root / ".dockerenv").exists():
        evidence.append("/.dockerenv exists")
        runtime = "docker"
    if (root / "run/.containerenv").exists():
        evidence.append("/run/.containerenv exists")
        runtime = "podman"
    if env.get("container"):
        evidence.append(f"container={env['container']} in the environment")
        runtime = runtime or env["container"]
    if env.get("KUBERNETES_SERVICE_HOST"):
        evidence.append("KUBERNETES_SERVICE_HOST is set")
        runtime = runtime or "kubernetes"
    for source in ("proc/1/cgroup", "proc/self/cgroup"):
        text = _read(root / source)
        for marker, name in _RUNTIME_MARKERS:
            if marker in text:
                evidence.append(f"/{source} names {marker}")
                runtime = runtime or name
                break
    for line in _read(root / "proc/self/mountinfo").splitlines():
        fields = line.split()
        if len(fields) > 4 and fields[4] == "/" and " - overlay " in line:
            evidence.append("the root filesystem is an overlay mount")
            break
    return ContainerInfo(bool(evidence), runtime, evidence)

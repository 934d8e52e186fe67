"""Docker: is there a client, an engine, an NVIDIA runtime? And the commands codedag runs."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class DockerStatus:
    """What Docker offers here; ``reason`` explains a missing client or engine."""

    client: str | None
    engine: str | None
    nvidia_runtime: bool
    reason: str

    @property
    def usable(self) -> bool:
        """Whether images can be built and containers run."""
        return self.engine is not None


def probe_docker(docker: str = "docker", timeout_s: float = 8.0) -> DockerStatus:
    """Ask ``docker --version`` and ``docker info`` (bounded by ``timeout_s``)."""
    binary = shutil.which(docker)
    if binary is None:
        return DockerStatus(None, None, False, "the docker client is not installed")
    try:
        version = subprocess.run(
            [binary, "--version"], capture_output=True, text=True, timeout=timeout_s
        )
        client = version.stdout.strip() or "unknown version"
        info = subprocess.run(
            [binary, "info", "--format", "{{.ServerVersion}} {{json .Runtimes}}"],
            capture_output=True,
            text=True,
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired:
        return DockerStatus(binary, None, False, f"docker info did not answer in {timeout_s:g} s")
    except OSError as e:
        return DockerStatus(None, None, False, f"docker could not be started: {e}")
    if info.returncode != 0 or not info.stdout.strip():
        lines = info.stderr.strip().splitlines() or ["no answer"]
        return DockerStatus(client, None, False, f"no Docker engine reachable: {lines[-1]}")
    server, _, runtimes = info.stdout.strip().partition(" ")
    return DockerStatus(client, server, "nvidia" in runtimes, "engine reachable")

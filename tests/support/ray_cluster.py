"""A real local Ray cluster for tests: a head on 127.0.0.1, started and stopped by the test."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil

# Ray otherwise binds to the machine's routable address; the test cluster stays on loopback.
LOOPBACK_ENV = {"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_USAGE_STATS_ENABLED": "0"}


@dataclass
class Cluster:
    address: str
    temp_dir: Path
    head: subprocess.Popen[bytes]

    def env(self) -> dict[str, str]:
        """Environment for a driver (the ``codedag`` CLI) that uses this cluster."""
        return {**os.environ, **LOOPBACK_ENV, "PYTHONUNBUFFERED": "1"}

    def raylet(self) -> psutil.Process | None:
        for proc in psutil.Process(self.head.pid).children(recursive=True):
            try:
                if proc.name() == "raylet":
                    return proc
            except psutil.Error:
                continue
        return None

    def workers(self) -> list[psutil.Process]:
        """Live Ray worker processes of this cluster (children of its raylet)."""
        raylet = self.raylet()
        if raylet is None:
            return []
        out = []
        for proc in raylet.children():
            try:
                if proc.status() != psutil.STATUS_ZOMBIE and proc.cmdline()[:1] != [""]:
                    title = " ".join(proc.cmdline())
                    if title.startswith("ray::") and "Agent" not in title:
                        out.append(proc)
            except psutil.Error:
                continue
        return out


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def local_cluster(num_cpus: int = 2) -> Iterator[Cluster]:
    """``ray start --head --block`` on 127.0.0.1; SIGTERM to it stops every process it started."""
    # A short folder: Ray's unix socket paths must stay under 108 characters.
    temp_dir = Path(tempfile.mkdtemp(prefix="cdray-", dir="/tmp"))
    port = _free_port()
    # Ports Ray would otherwise take at fixed numbers: another cluster on this machine (a second
    # test run) must not collide with this one.
    fixed = ["dashboard-port", "dashboard-agent-listen-port"]
    # This interpreter, not the `ray` script: its shebang may name another environment (a copied
    # virtualenv), and Ray's workers run the interpreter that started the head, so the tasks would
    # import another checkout's codedag.
    command = [
        sys.executable,
        "-m",
        "ray.scripts.scripts",
        "start",
        "--head",
        "--block",
        "--node-ip-address=127.0.0.1",
        f"--port={port}",
        *(f"--{flag}={_free_port()}" for flag in fixed),
        f"--num-cpus={num_cpus}",
        "--num-gpus=0",
        "--include-dashboard=false",
        "--disable-usage-stats",
        "--object-store-memory=80000000",
        f"--temp-dir={temp_dir}",
    ]
    log = open(temp_dir / "head.log", "wb")  # noqa: SIM115 - closed in finally
    head = subprocess.Popen(
        command,
        # TMPDIR: the node's own state (cooldown stamps, energy windows) goes with the cluster
        env={**os.environ, **LOOPBACK_ENV, "TMPDIR": str(temp_dir)},
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    cluster = Cluster(f"127.0.0.1:{port}", temp_dir, head)
    try:
        deadline = time.monotonic() + 120
        while b"Ray runtime started" not in (temp_dir / "head.log").read_bytes():
            if head.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("ray start failed:\n" + (temp_dir / "head.log").read_text())
            time.sleep(0.2)
        yield cluster
    finally:
        try:
            members = [head, *psutil.Process(head.pid).children(recursive=True)]
        except psutil.Error:  # ray start already ended (it failed to start)
            members = [head]
        head.send_signal(signal.SIGTERM)
        try:
            head.wait(timeout=60)
        except subprocess.TimeoutExpired:
            os.killpg(head.pid, signal.SIGKILL)
            head.wait()
        for proc in members[1:]:
            try:
                proc.kill()
            except psutil.Error:
                continue
        log.close()
        shutil.rmtree(temp_dir, ignore_errors=True)

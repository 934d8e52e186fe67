"""The environment a run measured on: host, Python, torch, CUDA, GPUs, CPU and memory limits.

Nothing here imports torch or initializes CUDA: torch facts come from ``sys.modules`` when the
training script already imported it, else from the installed package's metadata.
"""

from __future__ import annotations

import os
import platform
import socket
import sys
from importlib import metadata
from typing import Any


def _torch_facts() -> dict[str, Any]:
    torch = sys.modules.get("torch")
    if torch is None:
        try:
            version = metadata.version("torch")
        except metadata.PackageNotFoundError:
            version = None
        return {"torch": version, "cuda": None, "cudnn": None, "cuda_in_use": False}
    facts: dict[str, Any] = {
        "torch": getattr(torch, "__version__", None),
        "cuda": getattr(getattr(torch, "version", None), "cuda", None),
        "cudnn": None,
        "cuda_in_use": False,
    }
    try:
        facts["cuda_in_use"] = bool(torch.cuda.is_initialized())
        if facts["cuda_in_use"]:
            facts["cudnn"] = torch.backends.cudnn.version()
            facts["cuda_devices"] = [
                torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())
            ]
    except Exception as error:  # pragma: no cover - broken CUDA installs
        facts["cuda_error"] = str(error)
    return facts


def collect_environment(resources: dict[str, Any] | None = None) -> dict[str, Any]:
    """Plain-data description of this process's environment.

    Args:
        resources: a probe's ``describe()`` (CPU/memory sources and limits, container, GPUs),
            merged in under the same keys.
    """
    from codedag import __version__

    env: dict[str, Any] = {
        "host": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "codedag": __version__,
        "pid": os.getpid(),
        "cpu_count": os.cpu_count(),
        "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES"),
    }
    env.update(_torch_facts())
    if resources:
        env.update(resources)
    return env

"""What a measurement depends on besides the call: the device and the library versions."""

from __future__ import annotations

import functools
import importlib.metadata
import platform
import sys
from collections.abc import Callable

from codedag.backends.libraries import distributions


@functools.cache
def _version(distribution: str) -> str | None:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return None


@functools.cache
def backends_fingerprint() -> str:
    """A fingerprint of codedag's op library (file names, sizes, modification times): a changed
    backend invalidates its measurements even when the version number stays the same."""
    import hashlib
    from pathlib import Path

    import codedag.backends

    root = Path(codedag.backends.__file__).parent
    digest = hashlib.sha1()
    for path in sorted(root.rglob("*.py")):
        stat = path.stat()
        digest.update(f"{path.relative_to(root)}:{stat.st_size}:{stat.st_mtime_ns};".encode())
    return digest.hexdigest()[:12]


def library_versions(function: str) -> dict[str, str]:
    """Versions of codedag (and its backends' code), torch, Python and ``function``'s library:
    the distributions its library package declares, or the distribution named like the top
    module of a function no package declares."""
    from codedag.version import __version__

    versions = {
        "codedag": __version__,
        "codedag_backends": backends_fingerprint(),
        "python": platform.python_version(),
        "torch": _version("torch") or "",
    }
    declared = distributions(function)
    for distribution in declared if declared is not None else (function.split(".", 1)[0],):
        found = _version(distribution)
        if found:
            versions[distribution] = found
    return versions


@functools.cache
def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "cpu"


def device_name(device: str) -> str:
    """A description of ``device`` that identifies its speed: CPU model and torch threads, or
    the GPU's name and compute capability."""
    import torch

    if device.startswith("cuda"):
        index = torch.device(device).index or 0
        major, minor = torch.cuda.get_device_capability(index)
        return f"{torch.cuda.get_device_name(index)} (sm_{major}{minor})"
    if device == "mps":
        return f"Apple MPS ({platform.machine()})"
    return f"{_cpu_model()} ({torch.get_num_threads()} torch threads, {sys.platform})"


def device_sync(device: str) -> Callable[[], None]:
    """The function that waits for ``device``'s queued work (nothing to wait for on the CPU)."""
    import torch

    if device.startswith("cuda"):
        index = torch.device(device).index or 0
        return lambda: torch.cuda.synchronize(index)
    if device == "mps":
        return torch.mps.synchronize
    return lambda: None

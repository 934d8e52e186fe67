"""What a measurement depends on besides the call and the device: the library versions.

The device's description and how to wait for its work live in :mod:`codedag.devices.torch_devices`.
"""

from __future__ import annotations

import functools
import platform

from codedag.backends.libraries import distributions
from codedag.version import __version__, distribution_version


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
    versions = {
        "codedag": __version__,
        "codedag_backends": backends_fingerprint(),
        "python": platform.python_version(),
        "torch": distribution_version("torch") or "",
    }
    declared = distributions(function)
    for distribution in declared if declared is not None else (function.split(".", 1)[0],):
        found = distribution_version(distribution)
        if found:
            versions[distribution] = found
    return versions

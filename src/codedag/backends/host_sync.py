"""Whether a backend may read tensor values on the host to choose its path.

Some exact backends pick a faster path after looking at the data (the range of a warp's
coordinates, how many elements sit too close to a rounding boundary): on the CPU that read is
free, on a GPU it stalls the device until it has caught up. Inside :func:`no_host_sync` such
backends take a path that decides everything on the device instead (the same results, more
arithmetic); the batched executor opens it for devices, and tests open it on the CPU to check
that path and count its syncs.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

_ALLOWED: ContextVar[bool] = ContextVar("codedag_host_sync_allowed", default=True)


def host_sync_allowed() -> bool:
    """``False`` inside :func:`no_host_sync` (backends must not read tensor values then)."""
    return _ALLOWED.get()


@contextlib.contextmanager
def no_host_sync(active: bool = True) -> Iterator[None]:
    """Backends run their paths without data-dependent host reads in this block (``active``:
    ``False`` leaves the current setting as it is)."""
    if not active:
        yield
        return
    token = _ALLOWED.set(False)
    try:
        yield
    finally:
        _ALLOWED.reset(token)

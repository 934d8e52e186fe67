"""Pause Python's cyclic garbage collector around work that makes many long-lived objects.

Importing codedag's planner, building the backends' registry, tracing and applying a plan make
hundreds of thousands of objects, none of them garbage; each GC pass they trigger walks the
whole heap, which in a training process (torch, Lightning) takes 0.1-0.3 s per full pass. Passes
are deferred, not lost: the collector runs again once the last pause ends.
"""

from __future__ import annotations

import contextlib
import gc
import threading
from collections.abc import Iterator

_lock = threading.Lock()
_depth = 0
_enable_after = False


@contextlib.contextmanager
def gc_paused() -> Iterator[None]:
    """Disable the cyclic GC for the block; nested and concurrent pauses (other threads) end when
    the last one does, and the collector is enabled again only if it was when the first began."""
    global _depth, _enable_after
    with _lock:
        if _depth == 0:
            _enable_after = gc.isenabled()
            gc.disable()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0 and _enable_after:
                gc.enable()

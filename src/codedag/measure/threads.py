"""Measuring with the thread count the call will run with.

torch's intra-op thread pool decides how fast many backends run: DataLoader workers run with one
thread, and on a busy machine two threads can run a call 10-60x slower than one. A measurement
taken with another count than the call's is of another call.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

from codedag.errors import ConfigError


@contextlib.contextmanager
def torch_threads(count: int | None) -> Iterator[None]:
    """Run the block with ``count`` torch intra-op threads; restore the previous count after.

    Args:
        count: the thread count (1 for calls inside DataLoader workers); ``None`` keeps the
            process's setting and does not import torch.
    """
    if count is None:
        yield
        return
    if count < 1:
        raise ConfigError(f"torch threads must be at least 1, got {count!r}")
    import torch

    previous = torch.get_num_threads()
    if previous != count:
        torch.set_num_threads(count)
    try:
        yield
    finally:
        if torch.get_num_threads() != previous:
            torch.set_num_threads(previous)

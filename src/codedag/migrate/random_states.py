"""The global random generators' states (Python's, NumPy's, torch's), taken and put back.

A DataLoader batch that fails under a run-time optimization runs again without it from the
states it started with, so that its random draws are the ones the pipeline's own code makes.
Taking them costs about 45 µs (NumPy's generator alone 32 µs); the fetch wrappers of several
optimizations nest around one batch, and :func:`hold` takes them once for all of them.
"""

from __future__ import annotations

import random
import threading
from typing import Any

import numpy as np

RandomStates = tuple[Any, Any, Any]

_held = threading.local()


def capture() -> RandomStates:
    """The current states of Python's, NumPy's and torch's global generators."""
    import torch

    return random.getstate(), np.random.get_state(), torch.random.get_rng_state()


def restore(states: RandomStates) -> None:
    """Put back states taken by :func:`capture`."""
    import torch

    random.setstate(states[0])
    np.random.set_state(states[1])
    torch.random.set_rng_state(states[2])


def hold() -> tuple[RandomStates, bool]:
    """The states at the start of the outermost fetch of this thread, and whether this call took
    them (it then calls :func:`release` when its fetch ends). A wrapper nested inside another's
    fetch starts before any draw of the batch, so the states are the same."""
    states = getattr(_held, "states", None)
    if states is not None:
        return states, False
    states = _held.states = capture()
    return states, True


def release(taken: bool) -> None:
    """End a fetch that :func:`hold` took the states for (``taken``)."""
    if taken:
        _held.states = None

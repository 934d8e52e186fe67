"""The global random generators' states (Python's, NumPy's, torch's), taken and put back.

A DataLoader batch that fails under a run-time optimization runs again without it from the
states it started with, so that its random draws are the ones the pipeline's own code makes.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np

RandomStates = tuple[Any, Any, Any]


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

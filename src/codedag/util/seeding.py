"""Reproducibility: one call seeds every random number generator a training run touches."""

from __future__ import annotations

import logging
import os
import random

log = logging.getLogger(__name__)


def seed_everything(seed: int, deterministic: bool = True) -> int:
    """Seed Python's ``random``, NumPy, torch (CPU and every CUDA device) and set cuDNN flags.

    Args:
        seed: the seed; recorded by the caller in its results.
        deterministic: also make cuDNN deterministic (``deterministic=True``, ``benchmark=False``)
            and ask torch for deterministic algorithms where they exist (warn-only).

    Returns:
        The seed, for chaining into configs.
    """
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        from codedag.errors import ConfigError

        raise ConfigError(f"seed must be a non-negative integer, got {seed!r}")
    random.seed(seed)
    os.environ["PYTHONHASHSEED"] = str(seed)
    import numpy as np
    import torch

    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)
    # manual_seed seeds CUDA lazily too; this is explicit for readers. Without CUDA (or before
    # CUDA is initialized) the seed is only queued: nothing is initialized here.
    torch.cuda.manual_seed_all(seed)
    torch.backends.cudnn.deterministic = deterministic
    torch.backends.cudnn.benchmark = not deterministic
    if deterministic:
        torch.use_deterministic_algorithms(True, warn_only=True)
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
    log.debug("seeded random, numpy and torch with %d (deterministic=%s)", seed, deterministic)
    return seed

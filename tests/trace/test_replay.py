"""Random state for replaying a batch: a snapshot puts every generator back, and worker 0 is
seeded as torch seeds it."""

from __future__ import annotations

import random
from types import SimpleNamespace

import numpy as np
import torch
from torch.utils.data import get_worker_info

from codedag.trace.replay import RandomSnapshot, worker_seeds, worker_zero


class Augment:
    def __init__(self) -> None:
        self.rng = np.random.default_rng(1)
        self.torch_gen = torch.Generator().manual_seed(2)


def _draws(holder: Augment, generator: torch.Generator) -> tuple:
    return (
        random.random(),
        float(np.random.rand()),
        float(torch.rand(1)),
        float(torch.rand(1, generator=generator)),
        float(holder.rng.random()),
        float(torch.rand(1, generator=holder.torch_gen)),
    )


def test_a_snapshot_restores_global_given_and_held_generators() -> None:
    holder, generator = Augment(), torch.Generator().manual_seed(3)
    snapshot = RandomSnapshot(generators=(generator, None), holders=(holder,))
    first = _draws(holder, generator)
    snapshot.restore()
    assert _draws(holder, generator) == first
    snapshot.restore()  # global state back as it was: nothing drawn is lost for later code


def test_worker_zero_seeds_like_torch_and_sets_the_worker_info() -> None:
    seed, numpy_seed = worker_seeds(100, 0)
    assert seed == 100 and worker_seeds(100, 1)[0] == 101
    started: list[int] = []
    loader = SimpleNamespace(num_workers=2, dataset="ds", worker_init_fn=started.append)
    snapshot = RandomSnapshot()
    try:
        with worker_zero(loader, 100):
            info = get_worker_info()
            assert (info.id, info.num_workers, info.seed) == (0, 2, 100)
            assert torch.get_num_threads() == 1
            assert torch.initial_seed() == 100
            value = float(np.random.rand())
        np.random.seed(numpy_seed)
        assert float(np.random.rand()) == value
    finally:
        snapshot.restore()
    assert started == [0] and get_worker_info() is None

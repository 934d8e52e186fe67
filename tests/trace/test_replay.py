"""Random state for replaying a batch: a snapshot puts every generator back, and worker 0 is
seeded as torch seeds it."""

from __future__ import annotations

import random
import subprocess
import sys
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


def test_replay_imports_without_the_tracer() -> None:
    """Saving random state around a stored plan loads no tracing machinery; the package's
    names still resolve on first use."""
    code = (
        "import sys\n"
        "import codedag.trace.replay\n"
        "print(sorted(m for m in sys.modules if m.startswith('codedag.trace.')))\n"
        "from codedag.trace import EnhancedTracer, canonical_name\n"
        "import codedag.trace.tracer as tracer\n"
        "print(EnhancedTracer is tracer.EnhancedTracer, callable(canonical_name))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split("\n")[:2] == ["['codedag.trace.replay']", "True True"]

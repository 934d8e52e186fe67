"""Python's ``random`` seen by the tracer: its module functions and a held ``random.Random``'s
methods are recorded as calls of the sample, named as user code spells them, and known as
random draws; the wrappers only forward (the same numbers are drawn) and leave nothing behind."""

from __future__ import annotations

import random

import torch
from random_pipelines import Draws
from torch.utils.data import DataLoader

from codedag.backends.names import canonical_name
from codedag.backends.placement_blockers import draws_random_numbers
from codedag.optimize.samples import is_operation, traced_samples
from codedag.trace import trace_dataloader

DRAWS = [
    "random.shuffle",
    "random.random",
    "random.uniform",
    "random.randint",
    "random.gauss",
    "random.choice",
    "random.Random.random",
    "random.Random.uniform",
    "random.Random.getrandbits",
]


def test_every_draw_is_a_call_of_its_sample_in_call_order() -> None:
    originals = (random.uniform, random.random, random.Random.uniform)
    random.seed(0)
    tracer, batch = trace_dataloader(DataLoader(Draws(), batch_size=2))
    samples = traced_samples(tracer.dag)
    assert len(samples) == 2
    for sample in samples:
        names = [n.name for n in sorted(sample, key=lambda n: n.id) if is_operation(n)]
        assert [n for n in names if n.startswith("random.")] == DRAWS
        assert all(draws_random_numbers(n) for n in DRAWS)
    assert (random.uniform, random.random, random.Random.uniform) == originals
    random.seed(0)  # the replayed batch starts from the state saved before the warm-up run
    assert torch.equal(batch, next(iter(DataLoader(Draws(), batch_size=2))))


def test_a_held_generators_c_methods_are_named_after_its_public_class() -> None:
    rng = random.Random(1)
    assert canonical_name(rng.random) == "random.Random.random"
    assert canonical_name(rng.getrandbits) == "random.Random.getrandbits"
    assert canonical_name(random.random) == "random.random"
    assert canonical_name(random.uniform) == "random.uniform"

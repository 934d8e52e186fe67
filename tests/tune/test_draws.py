"""The probe of what samples draw random numbers from, and that it leaves every state as it was."""

from __future__ import annotations

import random

import numpy as np
import torch
from loader_support import HeldGenerator, PlainSamples, RandomSamples
from torch.utils.data import DataLoader, Dataset

from codedag.tune.draws import probe_draws


class _Clock(Dataset):
    def __len__(self) -> int:
        return 4

    def __getitem__(self, index: int) -> bytes:
        import os

        return os.urandom(4)


def test_each_source_of_draws_is_named_and_the_states_are_put_back() -> None:
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    expected = (random.random(), float(np.random.rand()), float(torch.rand(())))
    random.seed(3)
    np.random.seed(3)
    torch.manual_seed(3)
    assert probe_draws(DataLoader(RandomSamples())) == ["random", "numpy.random", "torch"]
    assert probe_draws(DataLoader(PlainSamples())) == []
    assert probe_draws(DataLoader(HeldGenerator())) == ["HeldGenerator.rng"]
    assert probe_draws(DataLoader(_Clock())) == ["unseeded"]
    assert (random.random(), float(np.random.rand()), float(torch.rand(()))) == expected


def test_an_iterable_data_set_is_not_probed() -> None:
    class Stream(torch.utils.data.IterableDataset):
        def __iter__(self):  # type: ignore[no-untyped-def]
            return iter(range(3))

    assert probe_draws(DataLoader(Stream())) is None

"""Finding the DataLoader of a pipeline: the one a factory returns, else the first it created
(DataLoader.__init__ is watched only while the factory runs), else one clear error."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from codedag.errors import ConfigError
from codedag.tune.capture import loader_from_factory

DATA = TensorDataset(torch.arange(8.0))


def test_a_returned_loader_is_taken_as_is() -> None:
    loader = DataLoader(DATA, batch_size=2)
    assert loader_from_factory(lambda: loader, "f") is loader


def test_the_first_loader_created_is_taken_when_none_is_returned() -> None:
    made: list[DataLoader] = []

    def train() -> float:
        made.append(DataLoader(DATA, batch_size=2))
        made.append(DataLoader(DATA, batch_size=4))
        return 0.5  # a loss: the target runs the pipeline itself

    init = DataLoader.__init__
    assert loader_from_factory(train, "train") is made[0]
    assert DataLoader.__init__ is init  # no longer watched
    DataLoader(DATA)  # and creating one now is not captured anywhere


def test_errors_name_the_factory_and_what_went_wrong() -> None:
    def broken() -> None:
        raise RuntimeError("no data")

    with pytest.raises(ConfigError, match="--dataloader m:f raised RuntimeError: no data"):
        loader_from_factory(broken, "--dataloader m:f")
    with pytest.raises(ConfigError, match="returned int and created no DataLoader"):
        loader_from_factory(lambda: 3, "target")

"""The example scripts' models: each maps its data shape to ten class scores, honours
``--dropout`` and learns its synthetic classes (the scripts import ``_common`` from their folder,
as they do when run as ``python mnist_cnn.py``)."""

from __future__ import annotations

import argparse
import importlib
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch import nn

import codedag.energy.examples._common as common

EXAMPLES = Path(common.__file__).parent
MODELS = {
    "codedag.energy.examples.mnist_cnn": ("build", (1, 28, 28)),
    "codedag.energy.examples.mnist_rnn": ("RowGRU", (1, 28, 28)),
    "codedag.energy.examples.resnet_cifar": ("SmallResNet", (3, 32, 32)),
}


def _example(name: str, monkeypatch: pytest.MonkeyPatch) -> ModuleType:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    return importlib.import_module(name)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_model_gives_ten_scores_and_uses_the_dropout(
    name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    factory, shape = MODELS[name]
    torch.manual_seed(0)
    model = getattr(_example(name, monkeypatch), factory)(0.25)
    assert isinstance(model, nn.Module)
    assert model(torch.zeros((3, *shape))).shape == (3, 10)
    dropouts = [m.p for m in model.modules() if isinstance(m, nn.Dropout)]
    assert dropouts and all(p == 0.25 for p in dropouts)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_model_learns_its_synthetic_classes(
    name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    factory, shape = MODELS[name]
    torch.manual_seed(0)
    model = getattr(_example(name, monkeypatch), factory)(0.0)
    args = argparse.Namespace(threads=0, seed=0, device="cpu", train_samples=256,
                              test_samples=64, lr=0.05, weight_decay=0.0, epochs=3,
                              batch_size=32)  # fmt: skip
    accuracy = common.train_and_test(model, args, shape)
    capsys.readouterr()
    assert accuracy > 30.0  # ten classes: chance is 10 %

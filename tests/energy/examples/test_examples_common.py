"""The example scripts' shared flags, synthetic classes and training loop."""

from __future__ import annotations

import argparse

import pytest
import torch
from torch import nn

import codedag.energy.examples._common as common


def _parse(monkeypatch: pytest.MonkeyPatch, *argv: str) -> argparse.Namespace:
    monkeypatch.setattr("sys.argv", ["example", *argv])
    return common.parse_args("an example", default_epochs=3, default_lr=0.05)


def test_flags_take_the_scripts_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    args = _parse(monkeypatch)
    assert (args.epochs, args.lr, args.seed, args.batch_size) == (3, 0.05, 1, 64)
    assert (args.train_samples, args.test_samples, args.dropout) == (512, 256, 0.0)
    args = _parse(monkeypatch, "--epochs", "0", "--lr", "0.5", "--weight-decay", "0.1")
    assert (args.epochs, args.lr, args.weight_decay) == (0, 0.5, 0.1)


def test_the_seed_decides_the_weights_built_next(monkeypatch: pytest.MonkeyPatch) -> None:
    _parse(monkeypatch, "--seed", "7")
    drawn = torch.rand(3)
    torch.manual_seed(7)
    assert torch.equal(torch.rand(3), drawn)


@pytest.mark.parametrize("argv", [["--lr", "0"], ["--epochs", "-1"], ["--dropout", "1.0"]])
def test_out_of_range_flags_exit_with_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], argv: list[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _parse(monkeypatch, *argv)
    assert exit_info.value.code == 2
    assert "need epochs >= 0, lr > 0, 0 <= dropout < 1" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv", [["--train-samples", "0"], ["--batch-size", "0"], ["--test-samples", "-1"]]
)
def test_sizes_below_one_exit_with_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, argv: list[str]
) -> None:
    with pytest.raises(SystemExit):
        _parse(monkeypatch, *argv)


def test_synthetic_classes_share_templates_across_seeds() -> None:
    x, y = common.synthetic_classes(50, (2, 3), classes=4, seed=0, noise=0.0)
    assert x.shape == (50, 2, 3) and y.shape == (50,) and int(y.max()) < 4
    other_x, other_y = common.synthetic_classes(50, (2, 3), classes=4, seed=1, noise=0.0)
    assert not torch.equal(y, other_y)
    # without noise a sample is its class's template, whatever the seed
    first = int(y[0])
    same = int((other_y == first).nonzero()[0])
    assert torch.equal(x[0], other_x[same])
    again_x, again_y = common.synthetic_classes(50, (2, 3), classes=4, seed=0, noise=0.0)
    assert torch.equal(again_x, x) and torch.equal(again_y, y)


def test_train_and_test_prints_each_epoch_and_the_accuracy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    args = argparse.Namespace(threads=0, seed=0, device="cpu", train_samples=64, test_samples=32,
                              lr=0.1, weight_decay=0.0, epochs=2, batch_size=16)  # fmt: skip
    accuracy = common.train_and_test(nn.Linear(8, 2), args, (8,), classes=2)
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "device=cpu params=18"
    assert out[1].startswith("Epoch 1/2 loss=") and out[2].startswith("Epoch 2/2 loss=")
    assert out[-3].startswith("Test Loss: ")
    assert out[-2] == f"Test Accuracy: {accuracy:.2f}%"
    assert out[-1] == "Training complete"
    assert 0.0 <= accuracy <= 100.0

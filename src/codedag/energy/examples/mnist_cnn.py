"""A small CNN on MNIST-shaped synthetic data (1x28x28, 10 classes)."""

from __future__ import annotations

from _common import parse_args, train_and_test
from torch import nn


def build(dropout: float) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 8, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1),
        nn.ReLU(),
        nn.MaxPool2d(2),
        nn.Flatten(),
        nn.Dropout(dropout),
        nn.Linear(16 * 7 * 7, 64),
        nn.ReLU(),
        nn.Linear(64, 10),
    )


if __name__ == "__main__":
    args = parse_args(__doc__, default_epochs=2, default_lr=0.05)
    train_and_test(build(args.dropout), args, (1, 28, 28))

"""A GRU that reads MNIST-shaped synthetic images row by row (28 steps of 28 features)."""

from __future__ import annotations

import torch
from _common import parse_args, train_and_test
from torch import nn


class RowGRU(nn.Module):
    def __init__(self, dropout: float, hidden: int = 32) -> None:
        super().__init__()
        self.gru = nn.GRU(28, hidden, batch_first=True)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(hidden, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _, h = self.gru(x.squeeze(1))
        return self.head(self.drop(h[-1]))


if __name__ == "__main__":
    args = parse_args(__doc__, default_epochs=2, default_lr=0.05)
    train_and_test(RowGRU(args.dropout), args, (1, 28, 28))

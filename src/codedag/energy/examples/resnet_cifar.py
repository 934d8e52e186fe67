"""A small ResNet (3 stages, one basic block each) on CIFAR-shaped synthetic data (3x32x32)."""

from __future__ import annotations

import torch
from _common import parse_args, train_and_test
from torch import nn


class Block(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.skip: nn.Module = nn.Identity()
        if stride != 1 or cin != cout:
            self.skip = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(self.bn2(self.conv2(out)) + self.skip(x))


class SmallResNet(nn.Module):
    def __init__(self, dropout: float, width: int = 8) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width))
        self.stages = nn.Sequential(
            Block(width, width, 1), Block(width, 2 * width, 2), Block(2 * width, 4 * width, 2)
        )
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(4 * width, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.stages(torch.relu(self.stem(x)))
        return self.head(self.drop(out.mean(dim=(2, 3))))


if __name__ == "__main__":
    args = parse_args(__doc__, default_epochs=2, default_lr=0.05)
    train_and_test(SmallResNet(args.dropout), args, (3, 32, 32))

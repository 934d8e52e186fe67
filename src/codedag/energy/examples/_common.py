"""Shared parts of the example training scripts: arguments, synthetic data, the training loop."""

from __future__ import annotations

import argparse
import random
import time

import torch
from torch import nn


def parse_args(description: str, default_epochs: int, default_lr: float) -> argparse.Namespace:
    """The flags every example accepts (the ones the bundled models config mutates)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--epochs", type=int, default=default_epochs)
    parser.add_argument("--lr", type=float, default=default_lr, help="learning rate")
    parser.add_argument("--weight-decay", type=float, default=0.0)
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--train-samples", type=int, default=512)
    parser.add_argument("--test-samples", type=int, default=256)
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch default)")
    parser.add_argument(
        "--device", default="cuda" if torch.cuda.is_available() else "cpu"
    )  # a standalone script: it runs without codedag importable
    args = parser.parse_args()
    if args.epochs < 0 or args.lr <= 0 or not 0.0 <= args.dropout < 1.0:
        parser.error(f"need epochs >= 0, lr > 0, 0 <= dropout < 1; got {vars(args)}")
    sizes = {"--batch-size": args.batch_size, "--train-samples": args.train_samples,
             "--test-samples": args.test_samples}  # fmt: skip
    small = [f"{flag} {value}" for flag, value in sizes.items() if value < 1]
    if small:
        parser.error(f"sizes must be at least 1, got {', '.join(small)}")
    torch.manual_seed(args.seed)  # the model is built next: --seed decides its initial weights
    return args


def synthetic_classes(
    n: int, shape: tuple[int, ...], classes: int, seed: int, noise: float = 1.0
) -> tuple[torch.Tensor, torch.Tensor]:
    """A learnable synthetic data set: one random template per class plus Gaussian noise.

    The templates depend only on ``classes`` and ``shape`` (fixed generator), so the train and
    test sets share them; ``seed`` only changes which samples are drawn.
    """
    templates = torch.randn((classes, *shape), generator=torch.Generator().manual_seed(1234))
    gen = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, classes, (n,), generator=gen)
    inputs = templates[labels] + noise * torch.randn((n, *shape), generator=gen)
    return inputs, labels


def train_and_test(
    model: nn.Module, args: argparse.Namespace, shape: tuple[int, ...], classes: int = 10
) -> float:
    """Train with SGD, print per-epoch lines and the final test accuracy (percent)."""
    if args.threads > 0:
        torch.set_num_threads(args.threads)
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    x_train, y_train = synthetic_classes(args.train_samples, shape, classes, args.seed)
    x_test, y_test = synthetic_classes(args.test_samples, shape, classes, args.seed + 10_000)
    model = model.to(device)
    optimizer = torch.optim.SGD(
        model.parameters(), lr=args.lr, momentum=0.9, weight_decay=args.weight_decay
    )
    loss_fn = nn.CrossEntropyLoss()
    print(f"device={device} params={sum(p.numel() for p in model.parameters())}", flush=True)
    for epoch in range(1, args.epochs + 1):
        start = time.perf_counter()
        model.train()
        order = torch.randperm(len(x_train))
        total, correct, loss_sum = 0, 0, 0.0
        for i in range(0, len(order), args.batch_size):
            idx = order[i : i + args.batch_size]
            x, y = x_train[idx].to(device), y_train[idx].to(device)
            optimizer.zero_grad()
            out = model(x)
            loss = loss_fn(out, y)
            loss.backward()
            optimizer.step()
            loss_sum += loss.item() * len(idx)
            correct += int((out.argmax(1) == y).sum())
            total += len(idx)
        print(
            f"Epoch {epoch}/{args.epochs} loss={loss_sum / total:.4f} "
            f"train_acc={100 * correct / total:.2f}% time={time.perf_counter() - start:.2f}s",
            flush=True,
        )
    model.eval()
    with torch.no_grad():
        out = torch.cat(
            [model(x_test[i : i + 256].to(device)).cpu() for i in range(0, len(x_test), 256)]
        )
        test_loss = float(loss_fn(out, y_test))
        accuracy = 100.0 * float((out.argmax(1) == y_test).float().mean())
    print(f"Test Loss: {test_loss:.4f}", flush=True)
    print(f"Test Accuracy: {accuracy:.2f}%", flush=True)
    print("Training complete", flush=True)
    return accuracy

"""Watched delivered tensors: plain results, and a call back for each move to a device."""

from __future__ import annotations

import torch

from codedag.backends.batched.watch import WatchedTensor, watch


def test_a_watched_tensor_reports_moves_to_a_device_and_nothing_else() -> None:
    seen: list[torch.device] = []
    x = watch(torch.arange(6.0).reshape(2, 3), seen.append)
    assert isinstance(x, WatchedTensor) and isinstance(x, torch.Tensor)
    assert type(x * 2) is torch.Tensor and torch.equal(x * 2, torch.arange(6.0).reshape(2, 3) * 2)
    assert type(torch.stack([x, x])) is torch.Tensor
    assert x.to(torch.float16).dtype == torch.float16 and seen == []  # a dtype: no move
    moved = x.to("cpu", non_blocking=True)
    assert type(moved) is torch.Tensor and seen == [torch.device("cpu")]
    x.to(device=torch.device("cpu"))
    x.to(torch.zeros(1))
    assert seen == [torch.device("cpu")] * 3

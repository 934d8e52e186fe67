"""Host->device copies of constants inside a captured tail (:mod:`codedag.backends.batched.
staging`): recorded on the warm-up, answered from the device while capturing, refused when they
differ. Checked on the CPU with the CPU as the "device", so the answered values can be read."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from codedag.backends.batched.staging import Staging, StagingMismatch


def _tail(scale: float = 2.0) -> list[torch.Tensor]:
    a = torch.tensor([1.0, scale], device="cpu")
    b = torch.as_tensor(np.arange(3), device=torch.device("cpu"))
    c = torch.ones(2).to("cpu", torch.float64)
    d = torch.empty(2, dtype=torch.int32)
    d.copy_(torch.full((2,), 7.0))
    a.add_(1)  # in place on an answered copy: what was kept stays as recorded
    e = torch.arange(3) * 2  # no copy: runs as it is
    return [a, b, c, d, e]


def test_copies_are_recorded_then_answered_from_what_was_kept() -> None:
    staging = Staging("cpu")
    with staging:
        recorded = _tail()
    assert staging.copies == 4  # tensor, as_tensor, to, copy_
    for _ in range(2):
        with staging.replaying():
            answered = _tail()
        staging.finished()
        for got, want in zip(answered, recorded, strict=True):
            assert torch.equal(got, want) and got.dtype == want.dtype
    assert torch.equal(recorded[0], torch.tensor([2.0, 3.0]))


def test_answered_copies_are_fresh_tensors() -> None:
    staging = Staging("cpu")
    with staging:
        _tail()
    with staging.replaying():
        first = _tail()
    with staging.replaying():
        second = _tail()
    assert first[0].data_ptr() != second[0].data_ptr()


def test_a_copy_of_other_values_while_capturing_is_refused() -> None:
    staging = Staging("cpu")
    with staging:
        _tail(scale=2.0)
    with pytest.raises(StagingMismatch), staging.replaying():
        _tail(scale=3.0)


def test_fewer_copies_while_capturing_are_refused() -> None:
    staging = Staging("cpu")
    with staging:
        _tail()
    with staging.replaying():
        torch.tensor([1.0, 2.0], device="cpu")
    with pytest.raises(StagingMismatch):
        staging.finished()


def test_copies_to_another_device_type_pass_through() -> None:
    staging = Staging("cuda")
    with staging:
        _tail()
    assert staging.copies == 0

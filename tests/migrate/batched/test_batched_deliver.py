"""Delivery of batched results: ``deliver="auto"`` watches the first batches and keeps the
rest on the chains' device once the training loop moves one there (no copy back)."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
import torch
from batched_support import Augmented, images, loader, max_level_diff, plan

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.batched.deliver import WATCH_BATCHES, DeliveryChoice
from codedag.migrate.batched.settings import BatchedSettings


def test_auto_settles_on_the_device_the_loop_moves_a_batch_to() -> None:
    choice = DeliveryChoice("auto", "cuda", copies=True)  # a device name only: nothing runs
    choice.batch_finished()
    assert choice.deciding and choice.watched == 1
    choice.moved(torch.device("cuda", 0))
    assert choice.on_device is True
    choice.moved(torch.device("cpu"))  # decided once
    assert choice.summary()["on"] == "device"


@pytest.mark.parametrize("moved_to", [None, torch.device("cpu"), torch.device("cuda", 1)])
def test_auto_stays_on_the_host_without_a_move_to_the_chains_device(
    moved_to: torch.device | None,
) -> None:
    choice = DeliveryChoice("auto", "cuda:0", copies=True)
    for _ in range(WATCH_BATCHES + 1):
        choice.batch_finished()
        if moved_to is not None:
            choice.moved(moved_to)
    assert choice.on_device is False and choice.summary()["on"] == "host"
    assert choice.watched <= WATCH_BATCHES


def test_the_users_choice_and_a_device_that_copies_nothing_are_decided_at_once() -> None:
    assert DeliveryChoice("device", "cuda:0", copies=True).on_device is True
    assert DeliveryChoice("host", "cuda:0", copies=True).on_device is False
    assert DeliveryChoice("auto", "cpu", copies=False).on_device is False


DEVICES = ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)]


def _train(
    batches: Any, move: bool, device: str
) -> tuple[list[tuple[torch.Tensor, torch.Tensor]], list[str], list[bool]]:
    """A training loop's use of the batches: moved to the chain's device, or not; the delivered
    images' devices, and whether those delivered on the host are in pinned memory."""
    seen, delivered_on, pinned = [], [], []
    for x, y in batches:
        delivered_on.append(x.device.type)
        if x.device.type == "cpu":
            pinned.append(x.is_pinned())
        if move:
            x, y = x.to(device, non_blocking=True), y.to(device)
        assert type(x) is torch.Tensor or not move  # what the step computes on is plain
        seen.append(((x * 1).cpu(), y.cpu()))
    return seen, delivered_on, pinned


@pytest.mark.timeout(120)
@pytest.mark.parametrize("move", [True, False])
@pytest.mark.parametrize("pin", [False, True])
@pytest.mark.parametrize("device", DEVICES)
def test_in_the_loader_auto_copies_nothing_back_once_the_loop_moves_batches(
    move: bool, pin: bool, device: str
) -> None:
    dataset = Augmented(images(20))
    reference = list(loader(dataset, batch_size=4))
    # deliver="auto"; on the CPU, copies made as a device would make them
    settings = BatchedSettings(verify=0, simulate_transfers=device == "cpu")
    migrator = PipelineMigrator.from_plan(plan(device=device), guard=False, batched=settings)
    no_pinning = pin and not torch.cuda.is_available()
    with migrator, pytest.warns() if no_pinning else contextlib.nullcontext():
        got, delivered_on, pinned = _train(
            loader(dataset, batch_size=4, pin_memory=pin), move, device
        )
    stats = migrator.get_stats()["batched"]
    assert stats["batches"] == 5 and stats["h2d_bytes"] > 0
    per_batch_bytes = reference[0][0].nbytes
    if move:  # the first batch came back watched; the loop moved it; the rest stayed
        assert stats["delivery"]["on"] == "device"
        assert stats["d2h_bytes"] == per_batch_bytes
        assert delivered_on == ["cpu"] + [torch.device(device).type] * 4
    else:  # watched batches, then the host: every batch copied back
        assert stats["delivery"]["on"] == "host"
        assert stats["d2h_bytes"] == 5 * per_batch_bytes
        assert delivered_on == ["cpu"] * 5
    # copied back from a GPU into pinned memory (a pageable copy back of a 100 MB batch ran at
    # 1.3 GB/s on an H200); on the CPU a copy as a device would make it, pageable
    assert pinned  # the first batch comes back watched, on the host
    if device != "cpu":
        assert all(pinned)
    elif not torch.cuda.is_available():
        assert not any(pinned)
    for (ref_x, ref_y), (x, y) in zip(reference, got, strict=True):
        assert torch.equal(y, ref_y)  # labels untouched
        assert max_level_diff(ref_x, x) <= 1.0

"""Batched execution on the cases real loaders meet: ragged input sizes, samples forced by user
code next to deferred ones, a custom ``collate_fn``, delivery on the device (no copy back), and
the same tests on CUDA (``-m gpu``)."""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import pytest
import torch
from batched_support import Augmented, images, loader, max_level_diff, plan, run

from codedag.migrate.batched.settings import BatchedSettings

STEPS = 12  # the chain's recorded steps per sample (library calls, operators, views)
RAGGED = ((48, 64), (40, 56), (36, 36))
DEVICES = ["cpu", pytest.param("cuda:0", marks=pytest.mark.gpu)]


def _close(reference: list[Any], batches: list[Any]) -> None:
    for (ref_x, ref_y), (x, y) in zip(reference, batches, strict=True):
        assert torch.equal(y, ref_y)
        assert max_level_diff(x.cpu(), ref_x) <= 1.001


class _Brightness(Augmented):
    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        import cv2

        img = cv2.resize(self.data[index], (self.size, self.size), interpolation=cv2.INTER_LINEAR)
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        if index % 2 and float(img.mean()) > 300.0:  # forces odd samples; never true
            img = 255 - img
        out = np.transpose(img.astype(np.float32) / 255.0, (2, 0, 1))
        return torch.from_numpy(np.ascontiguousarray(out)), index


class _Canvas(Augmented):
    """A letterbox: the resized image written into a slice of a padded canvas."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        import cv2

        img = cv2.resize(self.data[index], (self.size, self.size // 2))
        canvas = np.full((self.size, self.size, 3), 114, dtype=np.uint8)
        top = self.size // 4
        canvas[top : top + self.size // 2] = img
        return torch.from_numpy(canvas), index


@pytest.mark.timeout(120)
@pytest.mark.parametrize("device", DEVICES)
def test_ragged_input_sizes_regroup_after_the_resize(device: str) -> None:
    data = images(9, sizes=RAGGED)
    make = functools.partial(loader, Augmented(data), 0, 4)
    reference, batches, stats = run(make, plan(device=device))
    _close(reference, batches)
    assert stats["samples"] == 9 and stats["batches"] == 3 and stats["forced"] == {}
    assert stats["groups"] > stats["batches"]  # three input sizes per full batch
    # the resize (one step) runs once per input size; every step after it once per batch
    assert stats["backend_calls_per_batch_max"] <= 1 * len(RAGGED) + (STEPS - 1)


@pytest.mark.timeout(120)
@pytest.mark.parametrize("device", DEVICES)
def test_samples_forced_by_user_code_next_to_deferred_ones(device: str) -> None:
    make = functools.partial(loader, _Brightness(images(8)), 0, 4)
    reference, batches, stats = run(make, plan(["cv2.resize", "cv2.cvtColor"], device=device))
    for (ref_x, ref_y), (x, y) in zip(reference, batches, strict=True):
        assert torch.equal(y, ref_y)
        assert x.shape == ref_x.shape
        assert float((x.cpu() - ref_x).abs().max()) <= 1.001 / 255.0
    assert stats["forced"] == {"unsupported": 4}  # img.mean() of the odd samples
    assert stats["batches"] == 2 and stats["samples"] == 4  # the deferred (even) samples
    assert stats["ready_samples"] == 4  # forced ones ride along in the same batches
    assert any("(attribute .mean)" in site for site in stats["forced_sites"])


@pytest.mark.timeout(120)
def test_slicing_into_a_canvas_forces_with_the_reason_and_equals_the_reference() -> None:
    make = functools.partial(loader, _Canvas(images(6)), 0, 4)
    reference, batches, stats = run(make, plan(["cv2.resize"]))
    for (ref_x, ref_y), (x, y) in zip(reference, batches, strict=True):
        assert torch.equal(y, ref_y) and torch.equal(x, ref_x)  # forced: cv2 itself ran
    assert stats["forced"] == {"conversion": 6}


def _dict_collate(samples: list[tuple[torch.Tensor, int]]) -> dict[str, torch.Tensor]:
    return {
        "image": torch.stack([x for x, _ in samples]),
        "label": torch.tensor([y for _, y in samples]),
    }


def _normalizing_collate(samples: list[tuple[torch.Tensor, int]]) -> torch.Tensor:
    return torch.stack([x for x, _ in samples]).clamp(-1.0, 1.0)  # works on the stacked batch


@pytest.mark.timeout(120)
@pytest.mark.parametrize("workers", [0, 2])
def test_a_custom_collate_fn_stacking_deferred_samples_gets_a_batch(workers: int) -> None:
    make = functools.partial(loader, Augmented(images(6)), workers, 4, collate_fn=_dict_collate)
    reference = list(make())
    _ref, batches, stats = run(make)
    for ref, got in zip(reference, batches, strict=True):
        assert torch.equal(got["label"], ref["label"])
        assert max_level_diff(got["image"], ref["image"]) <= 1.001
    assert stats["forced"] == {} and stats["samples"] == 6 and stats["batches"] == 2


@pytest.mark.timeout(120)
def test_a_custom_collate_fn_using_the_stack_runs_again_on_forced_samples() -> None:
    make = functools.partial(loader, Augmented(images(6)), 0, 4, collate_fn=_normalizing_collate)
    reference = list(make())
    _ref, batches, stats = run(make)
    for ref, got in zip(reference, batches, strict=True):
        assert torch.equal(got, ref)  # forced: the CPU reference
    assert stats["forced"] == {"collate": 6} and stats["batches"] == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("device", DEVICES)
def test_delivery_on_the_device_copies_nothing_back(device: str) -> None:
    make = functools.partial(loader, Augmented(images(6)), 0, 4)
    simulate = device == "cpu"
    on_host = BatchedSettings(verify=0, deliver="host", simulate_transfers=simulate)
    on_device = BatchedSettings(verify=0, deliver="device", simulate_transfers=simulate)
    reference, host_batches, host = run(make, plan(device=device), on_host)
    _ref, device_batches, dev = run(make, plan(device=device), on_device)
    _close(reference, host_batches)
    _close(reference, device_batches)
    assert host["h2d_bytes"] > 0 and host["d2h_bytes"] > 0
    assert dev["h2d_bytes"] > 0 and dev["d2h_bytes"] == 0
    if device != "cpu":
        assert all(x.device.type == "cuda" for x, _y in device_batches)


class _Downscale(Augmented):
    """``cv2.resize`` by an integer factor (64 -> 32), whose backend reads values on a fast path."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:  # type: ignore[override]
        import cv2

        img = cv2.resize(self.data[index], (32, 32), interpolation=cv2.INTER_LINEAR)
        img = cv2.cvtColor(img, cv2.COLOR_BGR2RGB)
        return torch.from_numpy(np.ascontiguousarray(img.transpose(2, 0, 1))), index


@pytest.mark.timeout(120)
def test_a_backend_that_reads_values_still_defers() -> None:
    make = functools.partial(loader, _Downscale(images(6, sizes=((64, 64),))), 0, 3)
    reference, batches, stats = run(make, plan(["cv2.resize", "cv2.cvtColor"]))
    for (ref_x, ref_y), (x, y) in zip(reference, batches, strict=True):
        assert torch.equal(y, ref_y)
        assert int((x.int() - ref_x.int()).abs().max()) <= 1
    assert stats["forced"] == {} and stats["samples"] == 6


class _FlipFirst(torch.utils.data.Dataset):
    """Every other sample flips before its warp: a chain that starts at the flip in some
    samples and at the warp in the others (as it does after a cached prefix)."""

    def __len__(self) -> int:
        return 8

    def __getitem__(self, index: int) -> torch.Tensor:
        import cv2

        image = np.random.default_rng(index).integers(0, 256, (24, 24, 3), dtype=np.uint8)
        if index % 2:
            image = cv2.flip(image, 1)
        matrix = cv2.getRotationMatrix2D((12.0, 12.0), 10.0 * index, 1.0)
        image = cv2.warpAffine(image, matrix, (24, 24), borderMode=cv2.BORDER_REFLECT_101)
        return torch.from_numpy(np.ascontiguousarray(image))


@pytest.mark.parametrize("device", DEVICES)
def test_samples_starting_the_chain_at_different_steps_meet_with_their_own_values(
    device: str,
) -> None:
    from codedag.migrate.api import PipelineMigrator

    sample = f"torch.utils.data.dataloader._BaseDataLoaderIter.__next__#0/{__name__}"
    keys = [f"{sample}._FlipFirst.__getitem__#{i}/cv2.{f}#0" for i in range(4) for f in FW]
    chain = {"id": "c", "steps": [f"cv2.{f}" for f in FW], "functions": [f"cv2.{f}" for f in FW],
             "entries": keys, "entry_functions": [f"cv2.{f}" for f in FW], "batched": True}  # fmt: skip
    the_plan = {
        "context_device_map": {},
        "batched": {"mode": "always", "device": device, "chains": [chain]},
    }
    reference = list(torch.utils.data.DataLoader(_FlipFirst(), batch_size=4))
    with PipelineMigrator(the_plan, guard=False) as migrator:
        batches = list(torch.utils.data.DataLoader(_FlipFirst(), batch_size=4))
    stats = migrator.get_stats()["batched"]
    assert stats["samples"] == 8 and stats["forced"] == {}
    assert all(torch.equal(a, b) for a, b in zip(batches, reference, strict=True))


FW = ("flip", "warpAffine")

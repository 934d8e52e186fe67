"""Batched execution on codedag's example pipelines (codedag.experiments.pipelines): decoded
images, helper functions, random flips and affine matrices drawn in seeded workers, and a
letterbox of ragged sources with a copyMakeBorder canvas. The training loop gets the unpatched
seeded run's batches (within the tolerance table), with 0, 2 and 4 forked workers."""

from __future__ import annotations

import multiprocessing
from typing import Any

import pytest
import torch
from batched_support import plan

from codedag.experiments.pipelines import demo_image, letterbox, yolo_mosaic
from codedag.migrate.api import PipelineMigrator
from codedag.migrate.batched.settings import BatchedSettings
from codedag.optimize.manager import OptimizerManager
from codedag.trace import trace_dataloader

DEMO_CHAIN = ["cv2.resize", "cv2.cvtColor", "cv2.flip", "cv2.warpAffine"]


def _batches(module: Any, workers: int, **sizes: Any) -> list[Any]:
    assert multiprocessing.get_start_method() == "fork"  # Linux default: workers inherit patches
    return list(module.make_loader(batch_size=4, num_workers=workers, seed=3, n=10, **sizes))


def _run(module: Any, functions: list[str], workers: int, device: str = "cpu", **sizes: Any) -> Any:
    reference = _batches(module, workers, **sizes)
    migrator = PipelineMigrator.from_plan(
        plan(functions, device=device), guard=False, batched=BatchedSettings(verify=1)
    )
    with migrator:
        got = _batches(module, workers, **sizes)
    return reference, got, migrator.get_stats()["batched"]


def _images_and_labels(batch: Any) -> tuple[torch.Tensor, list[torch.Tensor]]:
    if isinstance(batch, dict):
        items = list(batch.values())
    else:
        items = list(batch)
    image = next(v for v in items if isinstance(v, torch.Tensor) and v.dim() == 4)
    return image, [v for v in items if v is not image and isinstance(v, torch.Tensor)]


def _assert_close(reference: list[Any], got: list[Any], levels: float) -> None:
    assert len(got) == len(reference)
    for ref, out in zip(reference, got, strict=True):
        ref_x, ref_rest = _images_and_labels(ref)
        x, rest = _images_and_labels(out)
        assert x.shape == ref_x.shape and x.dtype == ref_x.dtype
        for a, b in zip(ref_rest, rest, strict=True):
            assert torch.equal(a, b.cpu())  # labels, boxes: untouched
        diff = float((x.cpu().double() - ref_x.double()).abs().max())
        # uint8 outputs: levels; normalized floats: levels / 255 / std (std >= 0.224)
        bound = levels if ref_x.dtype == torch.uint8 else levels / 255.0 / 0.224
        assert diff <= bound, f"{diff} > {bound}"


@pytest.mark.timeout(240)
@pytest.mark.filterwarnings("ignore:This DataLoader will create 4 worker processes")
@pytest.mark.parametrize("workers", [0, 2, 4])
def test_demo_image_pipeline_equals_the_unpatched_seeded_run(workers: int) -> None:
    reference, got, stats = _run(demo_image, DEMO_CHAIN, workers, image_size=32, source_size=64)
    _assert_close(reference, got, levels=1.001)
    assert [len(_images_and_labels(b)[0]) for b in got] == [4, 4, 2]  # a partial last batch
    assert stats["samples"] == 10 and stats["batches"] == 3 and stats["forced"] == {}
    assert stats["verify"] == {"batches": 1, "mismatches": [], "max_abs_diff": 0.0}


LETTERBOX_CHAIN = ["cv2.resize", "cv2.copyMakeBorder", "cv2.cvtColor", "cv2.GaussianBlur"]


@pytest.mark.timeout(120)
def test_letterbox_with_ragged_sources_in_workers() -> None:
    reference, got, stats = _run(
        letterbox, LETTERBOX_CHAIN, 2, img_size=32, min_size=40, max_size=64
    )
    _assert_close(reference, got, levels=1.001)
    assert stats["samples"] == 10 and stats["forced"] == {}
    assert stats["groups"] > stats["batches"]  # ragged sources: several groups per batch
    assert stats["backend_calls_per_batch_max"] <= 12 * 4  # steps x groups, not x samples


@pytest.mark.gpu
@pytest.mark.timeout(240)
@pytest.mark.parametrize("workers", [0, 2, 4])
def test_demo_image_pipeline_on_cuda(workers: int) -> None:
    reference, got, stats = _run(
        demo_image, DEMO_CHAIN, workers, device="cuda:0", image_size=32, source_size=64
    )
    _assert_close(reference, got, levels=1.001)
    assert stats["samples"] == 10 and stats["forced"] == {}
    assert stats["device"].startswith("cuda") and stats["h2d_bytes"] > 0


@pytest.mark.slow
@pytest.mark.timeout(300)
@pytest.mark.parametrize("workers", [0, 2])
def test_yolo_mosaic_defers_through_its_custom_collate(workers: int) -> None:
    """The traced chain (the HSV conversion back, flips, CHW, contiguous) runs batched: the
    dataset's own ``collate_fn`` stacks deferred samples, and the batches (images and the
    labels concatenated beside them) are the unpatched seeded run's."""
    sizes = {"img_size": 64}
    tracer, _ = trace_dataloader(yolo_mosaic.make_loader(batch_size=4, seed=3, n=10, **sizes))
    manager = OptimizerManager(k=1, target_device="cpu", batched="always", calibrate=False)
    the_plan = manager.optimize(tracer.dag)["migration_plan"]
    assert the_plan["batched"]["chains"], "no chain found in the trace"
    reference = _batches(yolo_mosaic, workers, **sizes)
    migrator = PipelineMigrator.from_plan(the_plan, guard=False, batched=BatchedSettings(verify=1))
    with migrator:
        got = _batches(yolo_mosaic, workers, **sizes)
    stats = migrator.get_stats()["batched"]
    assert len(got) == len(reference)
    for (ref_x, ref_labels), (x, labels) in zip(reference, got, strict=True):
        assert torch.equal(labels, ref_labels)
        assert torch.equal(x, ref_x)
    assert stats["forced"] == {} and stats["samples"] == 10 and stats["batches"] == 3
    assert stats["verify"]["mismatches"] == []

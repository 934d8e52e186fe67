"""A pipeline written as training code writes it, and a plan with every section for it.

:class:`Photos` reads image files by path, resizes them (the prefix the cache keeps), converts
the colours (a call placed through torch), warps them by a random angle drawn with Python's
``random`` (in DataLoader workers too), normalizes with operators (a lookup-table run), flips
them at random with NumPy's generator and returns CHW tensors (a batched chain). :func:`plan`
gives each plan section for it, each made the way the optimizer writes it.
"""

from __future__ import annotations

import random
from typing import Any

import cv2
import numpy as np
import pytest
import torch
from prefix_support import FileDataset
from torch.utils.data import DataLoader

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)
SIZE = 32


class Photos(FileDataset):
    """Image files on disk, decoded and augmented per sample."""

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        image = cv2.resize(image, (SIZE, SIZE), interpolation=cv2.INTER_AREA)
        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)
        angle = random.uniform(-10.0, 10.0)
        matrix = cv2.getRotationMatrix2D((SIZE / 2, SIZE / 2), angle, 1.0)
        image = cv2.warpAffine(image, matrix, (SIZE, SIZE))
        image = (image.astype(np.float32) / 255.0 - MEAN) / STD
        if np.random.rand() < 0.5:
            image = cv2.flip(image, 1)
        return torch.from_numpy(np.ascontiguousarray(image.transpose(2, 0, 1))), index


def loader(paths: list[str], workers: int = 0, **options: Any) -> DataLoader:
    """The pipeline's own loader, with its settings spelled out as real code does."""
    return DataLoader(Photos(paths), batch_size=4, shuffle=False, num_workers=workers, **options)


SECTIONS = ("calls", "batched", "cache", "tables", "loader")
"""The plan's sections that change how a batch is made."""
CALLER = f"{__name__}.Photos.__getitem__"


def full_plan(paths: list[str]) -> dict[str, Any]:
    """A plan with every section for :class:`Photos`, made as the optimizer makes it.

    The trace and the batched chain are the optimizer's (``--batched always``); the figures
    calibration would measure are set: the cache cuts after the resize, the colour conversion
    is placed through torch on the CPU, the warp's output starts a lookup-table run and the
    loader prefetches more. :func:`codedag.optimize.cache_conflicts.resolve` then starts the
    batched chain after the cut, as the optimizer does.
    """
    from codedag.optimize.cache_conflicts import resolve
    from codedag.optimize.manager import OptimizerManager
    from codedag.plan import MigrationPlan
    from codedag.trace import trace_dataloader

    np.random.seed(1)  # the traced samples flip: the flip is one of the batched chain's steps
    tracer, _ = trace_dataloader(loader(paths))
    manager = OptimizerManager(
        k=1, target_device="cpu", batched="always", calibrate=False, cache="auto"
    )
    plan: dict[str, Any] = manager.optimize(tracer.dag)["migration_plan"]
    _place(plan, "cv2.cvtColor")
    for chain in plan["cache"]["chains"]:  # the store's costs, as calibration measures them
        cut = next(c for c in chain["candidates"] if c["step"] == "cv2.resize")
        chain.update(cached=True, cut={**cut, "saved_ns": 1_000_000})
    plan["tables"] = {
        "runs": [{"producer": "cv2.warpAffine", "callers": [CALLER], "calls": []}],
        "guards": ["cv2.flip", "torch.from_numpy"],
    }
    settings = {"num_workers": 0, "prefetch_factor": None, "pin_memory": False}
    plan["loader"] = {
        "chosen": {**settings, "pin_memory": True},
        "yours": settings,
        "changed": ["pin_memory"],
        "dataset": f"{__name__}.Photos",
    }
    return resolve(MigrationPlan.from_dict(plan)).to_dict()


def _place(plan: dict[str, Any], function: str) -> None:
    for call in plan["calls"]:
        if call["function"] == function:
            call.update(migrate=True, device="cpu", reason="measured faster")
            plan["context_device_map"].update(dict.fromkeys(call["context_keys"], "cpu"))


def only(plan: dict[str, Any], sections: tuple[str, ...]) -> dict[str, Any]:
    """``plan`` with only ``sections`` of :data:`SECTIONS` (placed calls kept on the CPU)."""
    kept = {k: v for k, v in plan.items() if k not in SECTIONS[1:] or k in sections}
    if "calls" not in sections:
        kept["context_device_map"] = {}
        kept["calls"] = [{**c, "migrate": False, "device": "cpu"} for c in plan["calls"]]
    return kept


def epochs(paths: list[str], workers: int, count: int = 2) -> list[list[torch.Tensor]]:
    """Every batch of ``count`` epochs of the pipeline's own loader, each epoch seeded."""
    out = []
    batches = loader(paths, workers)
    for epoch in range(count):
        random.seed(epoch)
        np.random.seed(epoch)
        torch.manual_seed(epoch)
        out.append([images.clone() for images, _ in batches])
    return out


def count_plan_validations(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """Every plan dict validated through ``MigrationPlan`` from now on, in order."""
    from codedag.plan import MigrationPlan

    seen: list[object] = []
    original = MigrationPlan.model_validate

    def counted(cls: type, data: Any, *args: Any, **kwargs: Any) -> MigrationPlan:
        seen.append(data)
        return original(data, *args, **kwargs)

    monkeypatch.setattr(MigrationPlan, "model_validate", classmethod(counted))
    return seen

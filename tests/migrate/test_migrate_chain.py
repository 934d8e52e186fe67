"""The whole chain: trace a cv2 + NumPy DataLoader, optimize for the CPU target, migrate, compare.

This proves each link the original system lacked: traced names hit the registry, the plan's keys
match at run time (migrated calls are counted for every placed function), outputs equal the
unmigrated batches, and restore() puts back the exact original objects.
"""

from __future__ import annotations

import cv2
import numpy as np
import torch
from migrate_support import flip
from torch.utils.data import DataLoader, Dataset

from codedag.backends.registry import Registry, default_registry, spec_from_backend
from codedag.migrate.api import PipelineMigrator
from codedag.optimize.manager import OptimizerManager
from codedag.optimize.placement import PlacementSettings
from codedag.patching import original_of
from codedag.trace.tracer import EnhancedTracer, trace_dataloader


class AugmentDataset(Dataset):
    """Images through cv2 and NumPy, as a typical augmentation pipeline does.

    The images are made up front: ``Generator.integers`` calls ``numpy.prod`` on its size tuple,
    which a plan may place although it has no array to move (it then falls back, correctly, but
    would never count as migrated).
    """

    def __init__(self) -> None:
        rng = np.random.default_rng(0)
        self.images = [rng.integers(0, 256, (120, 160, 3), dtype=np.uint8) for _ in range(12)]

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> torch.Tensor:
        img = self.images[index]
        img = cv2.resize(img, (96, 72), interpolation=cv2.INTER_LINEAR)
        img = cv2.flip(img, 1)
        x = img.astype(np.float32) / np.float32(255.0)
        x = np.clip(x * np.float32(1.4) - np.float32(0.2), 0.0, 1.0)
        x = np.sqrt(x)
        x = np.exp(x) - np.float32(1.0)
        return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))


def _registry() -> Registry:
    registry = Registry(dict(default_registry()._specs))
    if registry.get("cv2.flip") is None:  # until the cv2 backends export cv2.flip
        registry.register(spec_from_backend("cv2.flip", flip, "cv2"))
    return registry


def test_trace_optimize_migrate_equals_the_original_batches() -> None:
    loader = DataLoader(AugmentDataset(), batch_size=4)
    reference = [b.clone() for b in loader]
    registry = _registry()
    tracer, _batch = trace_dataloader(loader, EnhancedTracer(max_depth=8))
    # A what-if speedup places the cv2 and NumPy calls whatever torch on this CPU measures: the
    # migration mechanics are the point here (measured placement has its own tests).
    manager = OptimizerManager(
        k=2,
        target_device="cpu",
        can_migrate=registry.is_migratable,
        placement=PlacementSettings(assume_speedup=100.0),
    )
    plan = manager.optimize(tracer.dag)["migration_plan"]
    placed = {key.rsplit("/", 1)[-1].split("#")[0] for key in plan["context_device_map"]}
    # Which of the cv2 and NumPy calls the partitioner places depends on the measured times;
    # that it places some, and that every placed one is migrated, does not.
    assert placed, plan["notes"]
    # (np.sqrt, a ufunc called by the statement, is a step named numpy.sqrt: placeable too)
    assert placed <= {"cv2.resize", "cv2.flip", "numpy.clip", "numpy.sqrt"}, placed
    # every traced name the plan places is a registry name (one canonical name everywhere)
    assert all(registry.is_migratable(name) for name in placed)
    originals = {name: _lookup(name) for name in placed}

    migrator = PipelineMigrator.from_plan(plan, registry=registry, guard=False)
    counts = migrator.apply()
    try:
        assert counts == {"patched": len(placed), "failed": 0, "skipped": 0}
        batches = list(loader)
    finally:
        migrator.restore()

    assert len(batches) == len(reference)
    for got, want in zip(batches, reference):
        assert got.dtype == want.dtype and got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    stats = migrator.get_stats()["functions"]
    for name in placed:
        assert stats[name]["migrated"] > 0, (name, stats[name], placed)
        assert stats[name]["fell_back"] == 0, (name, stats[name]["fallback_reasons"])
        assert _lookup(name) is originals[name] and original_of(_lookup(name)) is originals[name]


def _lookup(name: str) -> object:
    module, _, attr = name.rpartition(".")
    owner = {"cv2": cv2, "numpy": np}[module]
    return getattr(owner, attr)


def test_every_traced_migratable_call_round_trips() -> None:
    """Place every traced call the registry knows (no optimizer): each traced name resolves to a
    registry entry, each traced key matches at run time, and each call is counted as migrated."""
    loader = DataLoader(AugmentDataset(), batch_size=4)
    reference = [b.clone() for b in loader]
    registry = _registry()
    tracer, _batch = trace_dataloader(loader, EnhancedTracer(max_depth=8))
    calls = [c for c in tracer.dag.calls() if registry.is_migratable(c.name)]
    names = {c.name for c in calls}
    assert {"cv2.resize", "cv2.flip", "numpy.clip"} <= names
    plan = {
        "schema_version": 1,
        "context_device_map": {c.context_key: "cpu" for c in calls},
        "calls": [],
    }
    with PipelineMigrator.from_plan(plan, registry=registry, guard=False) as migrator:
        batches = list(loader)
    for got, want in zip(batches, reference):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-6)
    stats = migrator.get_stats()["functions"]
    per_sample = {name: sum(1 for c in calls if c.name == name) // 4 for name in names}
    for name in names:
        assert stats[name]["migrated"] == per_sample[name] * len(AugmentDataset()), name
        assert stats[name]["fell_back"] == 0, stats[name]["fallback_reasons"]

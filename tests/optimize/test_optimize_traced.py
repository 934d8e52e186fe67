"""The optimizer on a real traced DataLoader batch: the plan speaks the tracer's context keys."""

from __future__ import annotations

import cv2
import numpy as np
from optimize_helpers import builtin_can_migrate
from torch.utils.data import DataLoader, Dataset

from codedag.optimize.manager import OptimizerManager
from codedag.optimize.placement import PlacementSettings
from codedag.trace import trace_dataloader

BATCH = 4


class _Images(Dataset):
    def __len__(self) -> int:
        return 8

    def __getitem__(self, idx: int) -> np.ndarray:
        image = np.full((256, 256, 3), idx, dtype=np.uint8)
        image = cv2.resize(image, (128, 128))
        return cv2.cvtColor(image, cv2.COLOR_BGR2RGB)


def test_plan_keys_are_exactly_the_traced_context_keys() -> None:
    tracer, _ = trace_dataloader(DataLoader(_Images(), batch_size=BATCH, num_workers=0))
    dag = tracer.dag
    traced = {n.context_key: n.name for n in dag.calls()}
    assert sum(1 for name in traced.values() if name == "cv2.resize") == BATCH
    manager = OptimizerManager(
        k=2,
        gpu_count=1,
        placement=PlacementSettings(assume_speedup=100.0),  # a what-if: keys are the point
        can_migrate=builtin_can_migrate,  # fixed, whatever the migration registry offers
    )
    result = manager.optimize(dag)
    plan = result["migration_plan"]
    placed = [key for call in plan["calls"] for key in call["context_keys"]]
    assert sorted(placed) == sorted(traced)  # each traced call placed once, under its own key
    assert plan["context_device_map"], "the resize/cvtColor chain is worth migrating here"
    for key, device in plan["context_device_map"].items():
        assert traced[key] in {"cv2.resize", "cv2.cvtColor"} and device == "cuda:0"
    # the per-sample work of the batch was merged: one resize cluster with B instances
    resize = [n for n in result["coarsened_dag"].calls() if n.name == "cv2.resize"]
    assert [n.instance_count for n in resize] == [BATCH]

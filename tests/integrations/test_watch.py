"""LoaderWatch: an epoch a training loop leaves open is sealed and planned when the loop says so."""

from __future__ import annotations

from typing import Any

import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.integrations.watch import LoaderWatch, WatchSettings


class Resized(Dataset):  # type: ignore[type-arg]
    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> Any:
        img = np.full((10, 8, 3), i, dtype=np.uint8)
        return torch.from_numpy(cv2.resize(img, (6, 6)).astype(np.float32))


def test_end_epoch_seals_an_open_epoch_and_plans_it() -> None:
    loader = DataLoader(Resized(), batch_size=4)
    watch = LoaderWatch(loader, WatchSettings(store_plans=False))
    try:
        iterator = watch.iterate(lambda: DataLoader.__iter__(loader))
        next(iterator)  # the loop stops after one batch of three
        assert watch.results.epochs == []
        watch.end_epoch()
        epochs = watch.results.epochs
        assert [(e.batches, e.complete, e.planned) for e in epochs] == [(1, False, False)]
        assert watch.plan is not None  # planned now, not when the next epoch starts
        assert watch.results.plan_status != "skipped", watch.results.plan_reason
        watch.end_epoch()  # nothing open: nothing changes
        assert len(watch.results.epochs) == 1
        second = list(watch.iterate(lambda: DataLoader.__iter__(loader)))
        assert len(second) == 3
        assert [e.complete for e in watch.results.epochs] == [False, True]
    finally:
        watch.close()


class Rows(Dataset):  # type: ignore[type-arg]
    """Slices of a tensor in memory: nothing to move, batch or cache."""

    def __init__(self) -> None:
        self.x = torch.arange(12 * 6, dtype=torch.float32).reshape(12, 6)

    def __len__(self) -> int:
        return 12

    def __getitem__(self, i: int) -> Any:
        return self.x[i, :4]


def test_a_plan_that_changes_nothing_is_not_applied() -> None:
    loader = DataLoader(Rows(), batch_size=4)
    watch = LoaderWatch(loader, WatchSettings(store_plans=False))
    try:
        for _ in range(3):
            assert len(list(watch.iterate(lambda: DataLoader.__iter__(loader)))) == 3
        results = watch.results
        assert results.plan_status == "nothing to apply", results.plan_reason
        assert watch.migrator is None and watch.plan is not None
        assert [e.planned for e in results.epochs] == [False, False, False]
        assert results.kept and not results.moved
    finally:
        watch.close()

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
        assert watch.results.plan_status == "applied", watch.results.plan_reason
        watch.end_epoch()  # nothing open: nothing changes
        assert len(watch.results.epochs) == 1
        second = list(watch.iterate(lambda: DataLoader.__iter__(loader)))
        assert len(second) == 3
        assert [e.planned for e in watch.results.epochs] == [False, True]
    finally:
        watch.close()

"""A value of a cached chain that the sample itself returns: the plan ends the chain there, and
a stand-in the trace could not see returned (nested deeper than it looks) reaches ``collate``
as its real value, never as a stand-in."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import pytest
from prefix_support import FileDataset, write_images
from torch.utils.data import DataLoader, default_collate

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.cache.runtime import CacheSettings
from codedag.store.tiers import StoreSettings


class RgbAndGray(FileDataset):
    """The RGB image and its grayscale, both returned: in a dict, a tuple, or a dict inside a
    list (deeper than the trace looks)."""

    shape = "dict"

    def __getitem__(self, index: int) -> Any:
        rgb = cv2.cvtColor(cv2.resize(cv2.imread(self.paths[index]), (24, 24)), cv2.COLOR_BGR2RGB)
        gray = cv2.cvtColor(rgb, cv2.COLOR_RGB2GRAY)
        if self.shape == "dict":
            return {"image": rgb, "gray": gray}
        if self.shape == "tuple":
            return rgb, gray
        return {"pair": [rgb, gray]}


def _plan(dataset: FileDataset) -> dict[str, Any]:
    from codedag.optimize.manager import OptimizerManager
    from codedag.trace import trace_dataloader

    tracer, _ = trace_dataloader(DataLoader(dataset, batch_size=4))
    plan = OptimizerManager(k=1, target_device="cpu", cache="auto").optimize(tracer.dag)
    return dict(plan["migration_plan"])


class Recorded:
    """A collate function that notes the type of every array it is handed."""

    def __init__(self) -> None:
        self.types: set[str] = set()

    def __call__(self, data: list[Any]) -> Any:
        def note(value: Any) -> None:
            if isinstance(value, dict):
                for item in value.values():
                    note(item)
            elif isinstance(value, list | tuple):
                for item in value:
                    note(item)
            else:
                self.types.add(type(value).__name__)

        note(data)
        return default_collate(data)


def _batches(dataset: FileDataset, collate: Any, epochs: int) -> list[bytes]:
    out = []
    for _ in range(epochs):
        for batch in DataLoader(dataset, batch_size=4, collate_fn=collate):
            out.append(repr(batch).encode())
    return out


@pytest.mark.parametrize("shape", ["dict", "tuple"])
def test_a_value_the_sample_returns_ends_the_chain(tmp_path: Path, shape: str) -> None:
    paths = write_images(tmp_path / "images", n=8)
    dataset = RgbAndGray(paths)
    dataset.shape = shape
    (chain,) = _plan(dataset)["cache"]["chains"]
    assert chain["steps"] == ["cv2.imread", "cv2.resize", "cv2.cvtColor"], chain["stop"]
    assert chain["stop"] == "its value goes to cv2.cvtColor and into the sample"


def test_a_stand_in_returned_deeper_than_the_trace_looks_is_collated_as_its_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = write_images(tmp_path / "images", n=8)
    dataset = RgbAndGray(paths)
    dataset.shape = "nested"
    plan = _plan(dataset)
    (chain,) = plan["cache"]["chains"]
    assert chain["steps"][-1] == "cv2.cvtColor" and len(chain["steps"]) == 4  # past the RGB
    assert chain["cached"] and chain["cut"]["position"] == 3, chain["reason"]
    plain = _batches(dataset, default_collate, 3)
    settings = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20)
    collate = Recorded()
    cache = CacheSettings(store=settings, judge_after=0)  # tiny images: kept whatever it costs
    with PipelineMigrator(plan, guard=False, cache=cache) as migrator:
        cached = _batches(dataset, collate, 3)
        stats = migrator.get_stats()["cache"]
    assert cached == plain
    assert collate.types == {"ndarray"}  # never a stand-in, in any epoch
    assert stats.hits == 2 * len(paths)

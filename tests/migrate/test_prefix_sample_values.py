"""What a sample receives from the prefix cache is what it computes without it: a value of a
chain that the sample itself returns ends the chain, a stand-in returned deeper than the trace
looks reaches ``collate`` as its real value, and a value torch computed with another thread
count is not read back."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import cv2
import pytest
import torch
import torch.nn.functional as F
from prefix_support import FileDataset, write_images
from torch.utils.data import DataLoader, default_collate

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.cache.runtime import CacheSettings
from codedag.store.tiers import StoreSettings

SIZE = 256
"""Side of the test images: decoding one costs far more than storing what the samples keep,
so the plan caches its chain however busy the machine (48 px images cost about what storing
their prefix did, and a busy machine's plan cached nothing)."""


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
    paths = write_images(tmp_path / "images", n=8, size=SIZE)
    dataset = RgbAndGray(paths)
    dataset.shape = shape
    (chain,) = _plan(dataset)["cache"]["chains"]
    assert chain["steps"] == ["cv2.imread", "cv2.resize", "cv2.cvtColor"], chain["stop"]
    assert chain["stop"] == "its value goes to cv2.cvtColor and into the sample"


def test_a_stand_in_returned_deeper_than_the_trace_looks_is_collated_as_its_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paths = write_images(tmp_path / "images", n=8, size=SIZE)
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


class Interpolated(FileDataset):
    """A decode, then a resize in torch: ``F.interpolate``'s result depends on torch's thread
    count."""

    def __getitem__(self, index: int) -> Any:
        image = torch.from_numpy(cv2.imread(self.paths[index])).permute(2, 0, 1).float()
        resized = F.interpolate(image[None], size=(72, 72), mode="bilinear", align_corners=False)
        return resized[0] / 255.0


def test_a_value_torch_computed_with_other_threads_is_not_read_back(tmp_path: Path) -> None:
    """A DataLoader worker runs torch with 1 thread where the script's process has 2: a value
    stored by one would differ in its last bits from what the other computes."""
    paths = write_images(tmp_path / "images", n=4, size=180)
    dataset = Interpolated(paths)
    plan = _plan(dataset)
    (chain,) = plan["cache"]["chains"]
    assert "torch.nn.functional.interpolate" in chain["steps"] and chain["cached"], chain["reason"]
    threads = torch.get_num_threads()

    def epoch(count: int) -> list[torch.Tensor]:
        torch.set_num_threads(count)
        return [b for b in DataLoader(dataset, batch_size=4)]

    try:
        own = {count: epoch(count) for count in (1, 2)}
        assert not torch.equal(own[1][0], own[2][0])  # what the key must tell apart
        settings = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20)
        cache = CacheSettings(store=settings, judge_after=0)
        with PipelineMigrator(plan, guard=False, cache=cache) as migrator:
            for count in (2, 1, 1, 2):  # stored with 2, missed and stored with 1, read by both
                assert all(torch.equal(a, b) for a, b in zip(epoch(count), own[count], strict=True))
            stats = migrator.get_stats()["cache"]
    finally:
        torch.set_num_threads(threads)
    assert (stats.stored, stats.hits) == (8, 8)


class Drawn(FileDataset):
    """OpenCV's drawing functions write into the image they receive and return it: a fixed
    mark whose result the sample ignores, then a border set in place."""

    def __getitem__(self, index: int) -> Any:
        image = cv2.resize(cv2.imread(self.paths[index]), (24, 24))
        cv2.circle(image, (6, 6), 3, (255, 255, 255), -1)
        image[:, :2] = 0
        return image


def test_a_call_that_draws_into_its_input_is_never_the_cut_and_its_writes_are_kept(
    tmp_path: Path,
) -> None:
    """Read back at ``cv2.circle``, the value was a new object while the sample went on with the
    image it held, computed again without the mark: other batches from the second epoch. And
    the image the sample then writes into is the value at the cut, which the writer found
    changed and never stored (every worker then found the tier's file cut short)."""
    paths = write_images(tmp_path / "images", n=8, size=SIZE)
    dataset = Drawn(paths)
    plan = _plan(dataset)
    (chain,) = plan["cache"]["chains"]
    assert chain["steps"] == ["cv2.imread", "cv2.resize", "cv2.circle"], chain["stop"]
    assert chain["cached"] and chain["cut"]["step"] == "cv2.resize", chain["reason"]
    plain = _batches(dataset, default_collate, 3)
    settings = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20)
    cache = CacheSettings(store=settings, judge_after=0)
    with PipelineMigrator(plan, guard=False, cache=cache) as migrator:
        cached = []
        for _ in range(3):
            cached += _batches(dataset, default_collate, 1)
            migrator.cache.session.writer.flush()  # each epoch's values stored, or found changed
        stats = migrator.get_stats()["cache"]
    assert cached == plain
    # the values queued before the writer found one changed are not stored: computed again in
    # the second epoch, and then copied at the cut and stored; the third reads every one back
    changed, n = stats.not_stored_changed, len(paths)
    assert 1 <= changed <= n and stats.stored == n
    assert stats.hits == 2 * n - changed


class ChannelsFirstViews(FileDataset):
    """A normalized image returned as a ``(3, H, W)`` view of its ``(H, W, 3)`` array, stacked
    by the script's own collate function (channels-last in memory, as the view is)."""

    def __getitem__(self, index: int) -> Any:
        image = cv2.resize(cv2.imread(self.paths[index]), (24, 24)).astype("float32")
        return (image / 255.0 - 0.5).transpose(2, 0, 1)


def _stacked(data: list[Any]) -> torch.Tensor:
    import numpy as np

    return torch.from_numpy(np.stack(data))


def test_a_value_read_back_keeps_its_layout_so_training_computes_the_same(
    tmp_path: Path,
) -> None:
    """Read back in C order, the stacked batch was contiguous where the script's own is
    channels-last: the same values, while a convolution over it rounded otherwise."""
    paths = write_images(tmp_path / "images", n=8, size=SIZE)
    dataset = ChannelsFirstViews(paths)
    plan = _plan(dataset)
    (chain,) = plan["cache"]["chains"]
    assert chain["cached"] and chain["cut"]["step"] == "numpy.ndarray.transpose", chain
    plain = [b for _ in range(3) for b in DataLoader(dataset, batch_size=4, collate_fn=_stacked)]
    assert not plain[0].is_contiguous()
    settings = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20)
    cache = CacheSettings(store=settings, judge_after=0)
    with PipelineMigrator(plan, guard=False, cache=cache) as migrator:
        cached = []
        for _ in range(3):
            cached += list(DataLoader(dataset, batch_size=4, collate_fn=_stacked))
            migrator.cache.session.writer.flush()
        stats = migrator.get_stats()["cache"]
    assert stats.hits == 2 * len(paths)
    for a, b in zip(cached, plain, strict=True):
        assert torch.equal(a, b) and a.stride() == b.stride()


class TurnedAfterTheFlip(FileDataset):
    """Photos turned upright by their EXIF orientation after a random flip: the cut (before the
    flip) must carry the EXIF that ``ImageOps.exif_transpose`` reads."""

    def __getitem__(self, index: int) -> Any:
        import random

        import numpy as np
        from PIL import Image, ImageOps

        image = Image.open(self.paths[index]).convert("RGB").resize((16, 16))
        if random.random() < 0.5:
            image = image.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        image = ImageOps.exif_transpose(image)
        return torch.from_numpy(np.asarray(image).copy())


def test_an_image_read_back_keeps_its_exif_so_it_is_turned_upright(tmp_path: Path) -> None:
    """Read back without its ``info``, an image of a photo taken sideways stayed sideways."""
    import random

    from PIL import Image

    paths = []
    for index, path in enumerate(write_images(tmp_path / "images", n=8, size=SIZE)):
        exif = Image.Exif()
        exif[0x0112] = (6, 8, 3, 1)[index % 4]
        turned = str(tmp_path / f"exif{index}.jpg")
        Image.open(path).save(turned, exif=exif.tobytes(), quality=95)
        paths.append(turned)
    dataset = TurnedAfterTheFlip(paths)
    plan = _plan(dataset)
    (chain,) = plan["cache"]["chains"]
    assert chain["cached"] and chain["cut"]["step"] == "PIL.Image.Image.resize", chain

    def epochs() -> list[torch.Tensor]:
        out = []
        for epoch in range(3):
            random.seed(epoch)
            out += [t for t in DataLoader(dataset, batch_size=1)]
        return out

    plain = epochs()
    settings = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20)
    cache = CacheSettings(store=settings, judge_after=0)
    with PipelineMigrator(plan, guard=False, cache=cache) as migrator:
        cached = epochs()
        stats = migrator.get_stats()["cache"]
    assert stats.hits == 2 * len(paths)
    assert all(torch.equal(a, b) for a, b in zip(cached, plain, strict=True))

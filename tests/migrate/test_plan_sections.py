"""Every combination of a plan's sections applies, runs and restores, giving the user's batches.

The pipeline is written as training code is (:mod:`plan_sections`): files read by path, Python's
and NumPy's random draws in the samples, the loader's settings passed explicitly. Each
combination of the sections (placed calls, batched chain, prefix cache, lookup tables, loader
settings) runs two epochs (the cache stores in the first and reads back in the second) with 0 and
2 workers, and every batch must equal the pipeline's own, bit for bit.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import pytest
import torch
from plan_sections import SECTIONS, epochs, full_plan, only
from prefix_support import write_images

from codedag.migrate.api import PipelineMigrator
from codedag.migrate.cache.runtime import CacheSettings
from codedag.store.tiers import StoreSettings

COMBINATIONS = [c for n in range(len(SECTIONS) + 1) for c in itertools.combinations(SECTIONS, n)]


@pytest.fixture(scope="module")
def photos(tmp_path_factory: pytest.TempPathFactory) -> tuple[list[str], dict[str, Any]]:
    paths = write_images(tmp_path_factory.mktemp("photos"), n=8, size=48)
    return paths, full_plan(paths)


@pytest.fixture(scope="module")
def own(photos: tuple[list[str], dict[str, Any]]) -> dict[int, list[list[torch.Tensor]]]:
    return {workers: epochs(photos[0], workers) for workers in (0, 2)}


def test_the_full_plan_has_every_section(photos: tuple[list[str], dict[str, Any]]) -> None:
    plan = photos[1]
    (chain,) = plan["batched"]["chains"]
    assert chain["batched"] and chain["steps"][0] == "cv2.cvtColor"  # after the cut
    assert chain["functions"] == ["cv2.cvtColor", "cv2.flip", "cv2.warpAffine"]
    assert plan["cache"]["chains"][0]["cached"]
    assert plan["context_device_map"] and plan["tables"]["runs"] and plan["loader"]["changed"]


@pytest.mark.parametrize("workers", [0, 2])
@pytest.mark.parametrize("sections", COMBINATIONS, ids=lambda c: "+".join(c) or "empty")
def test_every_combination_gives_the_users_batches(
    sections: tuple[str, ...],
    workers: int,
    photos: tuple[list[str], dict[str, Any]],
    own: dict[int, list[list[torch.Tensor]]],
    tmp_path: Path,
) -> None:
    paths, plan = photos
    store = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20)
    migrator = PipelineMigrator(
        only(plan, sections), guard=False, cache=CacheSettings(store=store, judge_after=0)
    )
    with migrator:
        got = epochs(paths, workers)
        stats = migrator.get_stats()
    for epoch, (mine, theirs) in enumerate(zip(got, own[workers], strict=True)):
        assert len(mine) == len(theirs)
        for batch, (a, b) in enumerate(zip(mine, theirs, strict=True)):
            assert torch.equal(a, b), f"epoch {epoch + 1}, batch {batch} differs"
    # each part ran as planned: none failed a batch or a sample and ran it again without itself
    # (the batches would be the same: a fallback hides the failure)
    if "cache" in sections:
        assert stats["cache"]["hits"] == len(paths)  # the second epoch read every prefix back
        assert stats["cache"]["misses"] == {"new": len(paths)}, stats["cache"]["diverged"]
    if "batched" in sections:
        assert stats["batched"]["samples"] == 2 * len(paths)
        assert stats["batched"]["forced"] == {} and stats["batched"]["retried_samples"] == 0
    if "tables" in sections:  # the batched chain takes the run's producer where it runs
        assert stats["tables"]["errors"] == 0, stats["tables"]
        assert bool(stats["tables"]["runs"]) is ("batched" not in sections), stats["tables"]
    if "calls" in sections and "batched" not in sections:
        assert stats["functions"]["cv2.cvtColor"]["migrated"] == 2 * len(paths)
    assert not migrator.is_applied()
    assert [b.equal(a) for a, b in zip(epochs(paths, 0)[0], own[0][0])] == [True] * 2


def test_a_second_plan_applied_at_once_fails_whole_and_names_its_sections(
    photos: tuple[list[str], dict[str, Any]],
    own: dict[int, list[list[torch.Tensor]]],
    tmp_path: Path,
) -> None:
    from codedag.errors import MigrationError
    from codedag.patching import active_patches

    paths, plan = photos
    store = StoreSettings(folder=tmp_path / "cache", ram_budget_bytes=16 << 20)
    settings = CacheSettings(store=store, judge_after=0)
    first = PipelineMigrator(only(plan, ("batched", "cache")), guard=False, cache=settings)
    second = PipelineMigrator(only(plan, ("cache", "tables")), guard=False, cache=settings)
    with first:
        patched = active_patches()
        with pytest.raises(MigrationError, match=r"plan's cache and tables section\(s\)") as error:
            second.apply()
        assert "\n" not in str(error.value) and "another plan applied" in str(error.value)
        assert active_patches() == patched and not second.is_applied()
        assert second.restore() == 0
    after = epochs(paths, 0)  # the plain loader again, nothing left patched
    assert all(torch.equal(a, b) for x, y in zip(after, own[0]) for a, b in zip(x, y, strict=True))

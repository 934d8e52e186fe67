"""Ranks of one machine share the prefix cache: under ``torchrun --nproc-per-node 2`` with a
shuffling ``DistributedSampler``, each rank's second epoch reads back the samples the other rank
stored in the first, and every batch equals the unpatched run."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from migrate_support import plan_for
from prefix_support import write_images

SCRIPT = """
import json
import sys
from pathlib import Path

import cv2
import numpy as np
import torch
import torch.distributed as dist
from torch.utils.data import DataLoader, Dataset, DistributedSampler


class Images(Dataset):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, index):
        image = cv2.imread(self.paths[index], cv2.IMREAD_COLOR)
        image = cv2.resize(image, (24, 24), interpolation=cv2.INTER_AREA)
        if np.random.default_rng(index).random() < 0.5:
            image = cv2.flip(image, 1)
        return torch.from_numpy(np.ascontiguousarray(image)), index


def main():
    images, plan, out = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
    dist.init_process_group("gloo")
    rank = dist.get_rank()
    migrator = None
    if plan != "-":
        from codedag.migrate.api import PipelineMigrator
        from codedag.migrate.cache.runtime import CacheSettings
        from codedag.store.tiers import StoreSettings

        store = StoreSettings(ram_budget_bytes=16 << 20, disk_budget_bytes=16 << 20)
        migrator = PipelineMigrator.from_json(plan, cache=CacheSettings(store=store, judge_after=0))
        migrator.apply()
    dataset = Images(sorted(str(p) for p in images.glob("*.png")))
    sampler = DistributedSampler(dataset, shuffle=True, seed=3)
    loader = DataLoader(dataset, batch_size=4, sampler=sampler, num_workers=0)
    batches, indices, stats = {}, [], []
    for epoch in range(2):
        sampler.set_epoch(epoch)
        seen = []
        for number, (batch, index) in enumerate(loader):
            batches[f"e{epoch}b{number}"] = batch.numpy()
            seen += [int(i) for i in index]
        indices.append(seen)
        if migrator is not None:
            stats.append(migrator.get_stats().cache.model_dump(mode="json"))  # stores what it queued first
        dist.barrier()  # every rank's first epoch is stored before any rank reads
    if migrator is not None:
        migrator.restore()
    np.savez(out / f"batches{rank}.npz", **batches)
    (out / f"rank{rank}.json").write_text(json.dumps({"indices": indices, "stats": stats}, default=str))
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
"""


def _plan() -> dict[str, object]:
    """A plan caching ``cv2.imread`` then ``cv2.resize`` wherever a fetch reads an image."""
    chain = {
        "id": "prefix0",
        "source_function": "cv2.imread",
        "source_slot": "0",
        "callers": [],
        "functions": ["cv2.imread", "cv2.resize"],
        "cached": True,
        "cut": {"step": "cv2.resize", "occurrence": 0},
    }
    return {**plan_for({}), "cache": {"chains": [chain]}}


def _launch(tmp_path: Path, plan: str, out: Path, cache: Path) -> None:
    out.mkdir()
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node"]
    command += ["2", str(tmp_path / "train.py"), str(tmp_path / "images"), plan, str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "CODEDAG_PREFIX_CACHE_DIR": str(cache)}
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]


@pytest.mark.slow
def test_ranks_on_one_machine_share_the_store_and_hit_what_the_other_rank_stored(
    tmp_path: Path,
) -> None:
    write_images(tmp_path / "images", n=16, size=32)
    (tmp_path / "train.py").write_text(SCRIPT)
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(_plan()))
    _launch(tmp_path, "-", tmp_path / "own", tmp_path / "unused")
    _launch(tmp_path, str(plan), tmp_path / "plan", tmp_path / "cache")
    stored = 0
    for rank in (0, 1):
        run = json.loads((tmp_path / "plan" / f"rank{rank}.json").read_text())
        own = json.loads((tmp_path / "own" / f"rank{rank}.json").read_text())
        assert run["indices"] == own["indices"]
        first, second = run["indices"]
        assert len(second) == 8 and set(second) - set(first)  # the other rank read these first
        before, after = run["stats"]
        assert before["hits"] == 0 and after["stored"] == before["stored"]
        stored += before["stored"]
        assert after["hits"] - before["hits"] == len(second), after
        assert after["misses"] == before["misses"]  # nothing computed in the second epoch
        # both ranks run in the launch's one generation: neither evicts the other's values
        assert [tier["generation"] for tier in after["tiers"]] == [1, 1]
        with (
            np.load(tmp_path / "plan" / f"batches{rank}.npz") as got,
            np.load(tmp_path / "own" / f"batches{rank}.npz") as expected,
        ):
            assert sorted(got.files) == sorted(expected.files)
            for name in expected.files:
                assert np.array_equal(got[name], expected[name]), (rank, name)
    assert stored == 16  # each sample once, by the rank that read it first

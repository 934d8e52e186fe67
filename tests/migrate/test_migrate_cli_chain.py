"""The file-based chain from the command line: codedag trace -> optimize -> migrate a script."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

from codedag.cli.main import main

PIPELINE = """
import cv2
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset


class Images(Dataset):
    def __init__(self):
        rng = np.random.default_rng(0)
        self.images = [rng.integers(0, 256, (90, 120, 3), dtype=np.uint8) for _ in range(8)]

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        img = cv2.resize(self.images[index], (64, 48))
        img = cv2.flip(img, 1)
        x = np.clip(img.astype(np.float32) / np.float32(255), 0.1, 0.9)
        return torch.from_numpy(x)


def make_loader():
    return DataLoader(Images(), batch_size=4)
"""

TRAIN = """
import json
import sys

import torch

from pipe import make_loader

total = torch.cat([batch for batch in make_loader()])
json.dump(total.tolist(), open(sys.argv[1], "w"))
"""


def test_trace_optimize_migrate_from_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "pipe.py").write_text(PIPELINE)
    (tmp_path / "train.py").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pipe", raising=False)
    assert (
        main(["-q", "trace", "--dataloader", "pipe:make_loader", "--out", "t", "--format", "json"])
        == 0
    )
    assert (
        main(
            [
                "-q",
                "optimize",
                "t/dag.json",
                "--target-device",
                "cpu",
                "--assume-speedup",
                "100",
                "--cache",  # every call here is deterministic: the prefix cache would own them
                "off",
                "--out",
                "o",
            ]
        )
        == 0
    )
    plan = json.loads((tmp_path / "o" / "migration_plan.json").read_text())
    placed = {key.rsplit("/", 1)[-1].split("#")[0] for key in plan["context_device_map"]}
    # which calls the partitioner places depends on measured times; that it places some does not
    assert placed and placed <= {"cv2.resize", "cv2.flip", "numpy.clip"}, plan["notes"]

    assert (
        main(
            [
                "-q",
                "migrate",
                "o/migration_plan.json",
                "--stats-out",
                "s.json",
                "--",
                "python",
                "train.py",
                "migrated.json",
            ]
        )
        == 0
    )
    monkeypatch.delitem(sys.modules, "pipe", raising=False)
    assert (
        main(
            [
                "-q",
                "migrate",
                "o/migration_plan.json",
                "--device",
                "cpu",
                "--",
                "python",
                "train.py",
                "migrated_again.json",
            ]
        )
        == 0
    )
    stats = json.loads((tmp_path / "s.json").read_text())
    for name in placed:
        assert stats["functions"][name]["migrated"] == 8, (name, stats["functions"][name])
        assert stats["functions"][name]["fell_back"] == 0
    import runpy

    monkeypatch.setattr(sys, "argv", ["train.py", "reference.json"])
    monkeypatch.delitem(sys.modules, "pipe", raising=False)
    runpy.run_path("train.py", run_name="__main__")  # the unmigrated reference
    reference = json.loads((tmp_path / "reference.json").read_text())
    migrated = json.loads((tmp_path / "migrated.json").read_text())
    np.testing.assert_allclose(np.array(migrated), np.array(reference), rtol=0, atol=1e-6)

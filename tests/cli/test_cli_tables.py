"""Lookup tables from the command line: trace, optimize with --tables, explain, migrate a script."""

from __future__ import annotations

import json
import runpy
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

MEAN = np.array([0.485, 0.456, 0.406], dtype=np.float32)
STD = np.array([0.229, 0.224, 0.225], dtype=np.float32)


class Images(Dataset):
    def __init__(self):
        rng = np.random.default_rng(0)
        self.images = [rng.integers(0, 256, (40, 48, 3), dtype=np.uint8) for _ in range(8)]

    def __len__(self):
        return len(self.images)

    def __getitem__(self, index):
        angle = float(np.random.default_rng(index).uniform(-10, 10))
        matrix = cv2.getRotationMatrix2D((24.0, 20.0), angle, 1.0)
        img = cv2.warpAffine(self.images[index], matrix, (48, 40))
        x = (img.astype(np.float32) / 255.0 - MEAN) / STD
        return torch.from_numpy(np.ascontiguousarray(x.transpose(2, 0, 1)))


def make_loader():
    return DataLoader(Images(), batch_size=4)
"""

TRAIN = """
import sys

import numpy as np
import torch

from pipe import make_loader

np.save(sys.argv[1], torch.cat([batch for batch in make_loader()]).numpy())
"""


@pytest.fixture
def traced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "pipe.py").write_text(PIPELINE)
    (tmp_path / "train.py").write_text(TRAIN)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "pipe", raising=False)
    args = ["-q", "trace", "--dataloader", "pipe:make_loader", "--out", "t", "--format", "json"]
    assert main(args) == 0
    return tmp_path


def _optimize(*flags: str) -> int:
    return main(["-q", "optimize", "t/dag.json", "--target-device", "cpu", "--no-calibrate",
                 "--cache", "off", *flags, "--out", "o"])  # fmt: skip


def test_the_plan_names_the_run_explain_shows_it_and_a_script_gets_the_same_batches(
    traced: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _optimize("--tables", "auto") == 0
    plan = json.loads((traced / "o" / "migration_plan.json").read_text())
    (run,) = plan["tables"]["runs"]
    assert run["producer"] == "cv2.warpAffine" and run["callers"] == ["pipe.Images.__getitem__"]
    capsys.readouterr()
    assert main(["plan", "explain", "o/migration_plan.json"]) == 0
    assert "lookup tables" in capsys.readouterr().out

    args = ["-q", "migrate", "o/migration_plan.json", "--stats-out", "s.json", "--"]
    assert main([*args, "python", "train.py", "migrated.npy"]) == 0
    stats = json.loads((traced / "s.json").read_text())["tables"]
    assert stats["runs"] == 8 and stats["errors"] == 0 and stats["mismatches"] == 0
    monkeypatch.setattr(sys, "argv", ["train.py", "reference.npy"])
    monkeypatch.delitem(sys.modules, "pipe", raising=False)
    runpy.run_path("train.py", run_name="__main__")  # the pipeline as written
    migrated, reference = np.load("migrated.npy"), np.load("reference.npy")
    assert migrated.tobytes() == reference.tobytes()


def test_tables_follow_the_cache_flag_and_off_leaves_them_out(traced: Path) -> None:
    assert _optimize() == 0  # --cache off, and no --tables: as the cache
    assert "tables" not in json.loads((traced / "o" / "migration_plan.json").read_text())
    assert _optimize("--tables", "off") == 0
    assert "tables" not in json.loads((traced / "o" / "migration_plan.json").read_text())


def test_an_unknown_mode_is_one_error(traced: Path, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        _optimize("--tables", "sometimes")
    assert exit_info.value.code == 2
    assert "--tables" in capsys.readouterr().err

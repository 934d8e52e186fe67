"""A monitor used in forked processes (DataLoader workers) writes nothing there."""

from __future__ import annotations

import csv
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.results import load_results

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="fork")


class MonitoredDataset(Dataset):
    """Calls the monitor from ``__getitem__``, as a user timing their preprocessing would."""

    def __init__(self, monitor: ExperimentMonitor, size: int) -> None:
        self.monitor, self.size = monitor, size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> torch.Tensor:
        self.monitor.start_batch()
        self.monitor.end_batch(1)
        self.monitor.log_loss(9, index, 123.0)
        self.monitor.flush()
        return torch.zeros(2)


def rows(path: Path) -> list[dict[str, str]]:
    with open(path, newline="") as handle:
        return list(csv.DictReader(handle))


def test_calls_in_dataloader_workers_record_nothing(tmp_path: Path) -> None:
    monitor = ExperimentMonitor("fork", run_dir=tmp_path, flush_interval_s=0)
    monitor.start_mode("baseline", resource_interval=None)
    loader = DataLoader(
        MonitoredDataset(monitor, 64),
        batch_size=2,
        num_workers=2,
        multiprocessing_context="fork",
    )
    for index, _batch in enumerate(loader):
        monitor.start_batch()
        monitor.end_batch(2)
        monitor.log_loss(0, index, 1.0)
    monitor.stop_mode()
    mode = load_results(monitor.results_path)["modes"]["baseline"]
    assert mode["summary"]["num_batches"] == 32
    assert len(rows(tmp_path / mode["files"]["batches"])) == 32
    losses = rows(tmp_path / mode["files"]["metrics"])
    assert len(losses) == 32 and {r["epoch"] for r in losses} == {"0"}


CHILD = textwrap.dedent(
    """
    import os, sys
    from codedag.monitor.experiment import ExperimentMonitor

    monitor = ExperimentMonitor("fork", run_dir=sys.argv[1], flush_interval_s=3600)
    monitor.start_mode("baseline", resource_interval=None)
    for i in range(5):
        monitor.start_batch()
        monitor.end_batch(1)
    monitor.flush()
    for i in range(3):  # buffered in the CSV file object when the fork happens
        monitor.start_batch()
        monitor.end_batch(1)
    monitor.to_dict()  # folds the rows into the stream's buffer (not flushed)
    pid = os.fork()
    if pid == 0:
        monitor.start_batch()
        monitor.end_batch(1)
        monitor.save_json()
        sys.exit(0)  # a normal exit: the interpreter flushes every open file it inherited
    os.waitpid(pid, 0)
    monitor.stop_mode()
    """
)


def test_a_forked_child_exiting_normally_leaves_the_parent_files_alone(tmp_path: Path) -> None:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    run = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "run")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 0, run.stderr
    assert "ignored" in run.stderr  # one warning from the child
    mode = load_results(tmp_path / "run" / "results.json")["modes"]["baseline"]
    assert mode["summary"]["num_batches"] == 8
    assert len(rows(tmp_path / "run" / mode["files"]["batches"])) == 8

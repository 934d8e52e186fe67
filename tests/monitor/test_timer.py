"""Batch time vs data wait, CUDA timing modes on fake events, and bounded memory on long runs."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import psutil
import pytest
import torch
from torch.utils.data import DataLoader, Dataset

from codedag.errors import ConfigError
from codedag.monitor.experiment import ExperimentMonitor
from codedag.monitor.spill import CsvSpill
from codedag.monitor.timer import BATCH_CSV_HEADER, Timer

SLEEP_PER_ITEM_S = 0.005  # 4 items per batch: 20 ms of loading per batch


class SlowDataset(Dataset):
    def __len__(self) -> int:
        return 24

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        time.sleep(SLEEP_PER_ITEM_S)
        return torch.full((8,), float(index)), index % 2


def slow_loader() -> DataLoader:
    return DataLoader(SlowDataset(), batch_size=4, num_workers=0)


def check_pipeline_bound(summary: dict[str, Any]) -> None:
    wait = summary["data_wait"]
    assert summary["num_batches"] == 6
    # every wait holds four sleeps of 5 ms: a lower bound that no scheduler can undercut
    assert wait["min"] >= 4 * SLEEP_PER_ITEM_S
    assert wait["share_pct"] > 50.0  # the loader, not the step, dominates
    assert wait["total"] > summary["step_time"]["total"] - wait["total"]


def test_track_splits_loader_wait_from_the_step(tmp_path: Path) -> None:
    model = torch.nn.Linear(8, 2)
    monitor = ExperimentMonitor("wait", run_dir=tmp_path, stream_to_disk=False)
    monitor.start_mode("baseline", resource_interval=None)
    for x, _ in monitor.track(slow_loader()):
        model(x).sum().backward()
    summary = monitor.stop_mode()
    check_pipeline_bound(summary)
    assert summary["throughput"]["samples_per_s"] > 0  # batch size read from the tensors


def test_seed_loop_measures_the_same_split(tmp_path: Path) -> None:
    monitor = ExperimentMonitor("wait", run_dir=tmp_path, stream_to_disk=False)
    monitor.start_mode("baseline", resource_interval=None)
    for batch_idx, (x, _) in enumerate(slow_loader()):
        monitor.start_batch()
        x.mul(2).sum()
        monitor.end_batch()
        monitor.log_loss(0, batch_idx, 1.0)
    check_pipeline_bound(monitor.stop_mode())


def test_paused_block_is_not_data_wait() -> None:
    clock = FakeClock()
    timer = Timer("none", clock=clock)
    timer.start()
    clock.t = 1.0
    timer.start_batch()
    clock.t = 1.5
    timer.end_batch()
    with timer.paused():
        clock.t = 10.0  # validation
    clock.t = 10.25
    timer.start_batch()
    clock.t = 10.5
    timer.end_batch()
    (_, b0), (_, b1) = timer.batch_series()[0]
    waits = [p[1] for p in timer.batch_series()[1]]
    assert (b0, b1) == (0.5, 0.25) and waits == [1.0, 0.25]


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class FakeEvent:
    """A CUDA event whose device timestamp is the fake clock at record() (ms apart)."""

    def __init__(self, clock: FakeClock, done: list[bool]) -> None:
        self.clock, self.done, self.at = clock, done, None

    def record(self) -> None:
        self.at = self.clock.t + 0.01  # the GPU runs 10 ms behind the host

    def query(self) -> bool:
        return self.done[0]

    def synchronize(self) -> None:
        self.done[0] = True

    def elapsed_time(self, end: FakeEvent) -> float:
        return (end.at - self.at) * 1000.0


def test_event_timing_uses_device_time_and_resolves_lazily() -> None:
    clock, done = FakeClock(), [False]
    timer = Timer("events", clock=clock, event_factory=lambda: FakeEvent(clock, done))
    timer.start()
    for start, end in ((1.0, 1.2), (1.5, 1.6)):
        clock.t = start
        timer.start_batch()
        clock.t = end
        timer.end_batch()
    assert timer.num_batches == 0  # events still pending: nothing read yet, no host sync
    timer.stop()  # waits for them
    times = [round(p[1], 9) for p in timer.batch_series()[0]]
    waits = [round(p[1], 9) for p in timer.batch_series()[1]]
    assert times == [0.2, 0.1]
    # first wait is host time since start; the second is the GPU gap between the two steps
    assert waits == [1.0, 0.3]
    assert timer.summary()["timing"]["cuda_timing"] == "events"


def test_sync_timing_synchronizes_around_each_step() -> None:
    calls: list[float] = []
    clock = FakeClock()
    timer = Timer("sync", clock=clock, sync_fn=lambda: calls.append(clock.t))
    timer.start()
    for _ in range(3):
        timer.start_batch()
        clock.t += 0.1
        timer.end_batch()
    assert len(calls) == 6 and timer.num_batches == 3


def test_auto_timing_without_cuda_is_host_clock_and_bad_mode_is_refused() -> None:
    timer = Timer()
    timer.start_batch()
    timer.end_batch()
    assert timer.timing == "none"
    with pytest.raises(ConfigError, match="cuda_timing"):
        Timer("cuda")
    with pytest.raises(ConfigError, match="cuda_timing"):
        ExperimentMonitor(cuda_timing="fast")


def test_misuse_warns_and_never_raises(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    monitor = ExperimentMonitor("misuse", run_dir=tmp_path, stream_to_disk=False)
    monitor.start_batch()  # no mode yet
    monitor.start_mode("a", resource_interval=None)
    monitor.end_batch()  # no start_batch
    monitor.start_batch()
    monitor.start_batch()
    monitor.end_batch()
    assert monitor.stop_mode()["num_batches"] == 1
    assert "without a running mode" in caplog.text and "without start_batch" in caplog.text


def test_a_million_batches_keep_memory_bounded_and_spill_every_row(tmp_path: Path) -> None:
    n = 1_000_000
    spill = CsvSpill(tmp_path / "batches.csv", BATCH_CSV_HEADER)
    clock = FakeClock()
    timer = Timer("none", clock=clock, spill=spill, downsample_capacity=1024)
    rss_before = psutil.Process().memory_info().rss
    timer.start()
    start_batch, end_batch = timer.start_batch, timer.end_batch
    for i in range(n):
        clock.t = i * 1e-3
        start_batch()
        clock.t = i * 1e-3 + 4e-4 + (i % 7) * 1e-5
        end_batch(32)
    timer.stop()
    rss_growth_mb = (psutil.Process().memory_info().rss - rss_before) / 2**20
    times, waits, stride = timer.batch_series()
    assert timer.num_batches == n
    assert len(times) <= 1024 and len(waits) == len(times) and stride >= n // 1024
    assert times[-1][0] > n - 2 * stride  # the kept points still reach the end of the run
    assert len(timer.batch_hist._counts) < 50  # quantile buckets do not grow with the count
    assert rss_growth_mb < 30  # a list of 10^6 rows would alone take more
    summary = timer.summary()
    assert summary["batch_time"]["p50"] == pytest.approx(4.3e-4, rel=0.02)
    assert summary["throughput"]["samples_per_s"] > 0
    with open(spill.path, encoding="utf-8") as fh:
        header = fh.readline().strip()
        rows = sum(1 for _ in fh)
    assert header == BATCH_CSV_HEADER and rows == n

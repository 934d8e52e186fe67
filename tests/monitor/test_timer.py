"""Batch timing: data-wait accounting, CUDA sync and event modes (with fakes on the CPU)."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterator

import pytest

from codedag.errors import ConfigError
from codedag.monitor.stats import Downsampler, LogHistogram, RunningStats
from codedag.monitor.timer import Timer


class FakeClock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def _loader(clock: FakeClock, n: int, wait_s: float) -> Iterator[int]:
    for i in range(n):
        clock.sleep(wait_s)  # the pipeline's work for this batch
        yield i


def test_data_wait_and_batch_time_are_split_exactly() -> None:
    clock = FakeClock()
    timer = Timer("none", clock=clock)
    timer.start()
    for _ in _loader(clock, 10, wait_s=0.030):
        timer.start_batch()
        clock.sleep(0.010)  # the training step
        timer.end_batch(n_samples=32)
    timer.stop()
    s = timer.summary()
    assert s["num_batches"] == 10
    assert s["batch_time"]["mean"] == pytest.approx(0.010)
    assert s["data_wait"]["mean"] == pytest.approx(0.030)
    assert s["data_wait"]["share_pct"] == pytest.approx(75.0)
    assert s["throughput"]["batches_per_s"] == pytest.approx(25.0)
    assert s["throughput"]["samples_per_s"] == pytest.approx(800.0)
    assert s["total_time"] == pytest.approx(0.4)


def test_data_wait_with_a_sleeping_loader() -> None:
    timer = Timer("none")
    timer.start()

    def loader() -> Iterator[int]:
        for i in range(4):
            time.sleep(0.02)
            yield i

    for _ in loader():
        timer.start_batch()
        timer.end_batch()
    waits, batches = timer.wait_stats, timer.batch_stats
    assert waits.count == 4
    assert waits.min >= 0.02  # sleep() never returns early
    assert batches.total < waits.total


def test_paused_block_is_not_data_wait() -> None:
    clock = FakeClock()
    timer = Timer("none", clock=clock)
    timer.start()
    timer.start_batch()
    timer.end_batch()
    with timer.paused():
        clock.sleep(5.0)  # validation
    clock.sleep(0.1)
    timer.start_batch()
    timer.end_batch()
    assert timer.wait_stats.max == pytest.approx(0.1)


def test_sync_mode_synchronizes_before_each_clock_read() -> None:
    calls = []
    timer = Timer("sync", sync_fn=lambda: calls.append(1))
    timer.start()
    for _ in range(3):
        timer.start_batch()
        timer.end_batch()
    assert len(calls) == 6


class FakeEvent:
    """Mimics torch.cuda.Event: a GPU timestamp that completes when the fake GPU gets there."""

    def __init__(self, gpu: FakeGPU) -> None:
        self.gpu = gpu
        self.time_ms: float | None = None

    def record(self) -> None:
        self.time_ms = self.gpu.enqueue_marker()

    def query(self) -> bool:
        return self.time_ms is not None and self.time_ms <= self.gpu.done_ms

    def synchronize(self) -> None:
        assert self.time_ms is not None
        self.gpu.done_ms = max(self.gpu.done_ms, self.time_ms)

    def elapsed_time(self, end: FakeEvent) -> float:
        assert self.query() and end.query()
        assert self.time_ms is not None and end.time_ms is not None
        return end.time_ms - self.time_ms


class FakeGPU:
    def __init__(self) -> None:
        self.queue_ms = 0.0  # GPU time at the end of the queued work
        self.done_ms = 0.0

    def enqueue_marker(self) -> float:
        return self.queue_ms


def test_event_mode_measures_gpu_time_and_gpu_idle_gap() -> None:
    gpu = FakeGPU()
    timer = Timer("events", event_factory=lambda: FakeEvent(gpu), max_pending_events=4)
    timer.start()
    for _ in range(10):
        gpu.queue_ms += 7.0  # GPU idle while the next batch is prepared
        timer.start_batch()
        gpu.queue_ms += 20.0  # kernels of the step
        timer.end_batch()
        assert len(timer._pending) <= 5  # bounded: the oldest is waited for
    timer.stop()  # resolves the rest
    assert timer.num_batches == 10
    assert timer.batch_stats.mean == pytest.approx(0.020)
    # the first batch's wait comes from the host clock; every later one is the GPU idle gap
    assert timer.wait_hist.quantile(0.5) == pytest.approx(0.007, rel=0.01)


def test_misuse_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    timer = Timer("none")
    timer.end_batch()
    timer.start_batch()
    timer.start_batch()
    timer.end_batch()
    assert timer.num_batches == 1
    assert "without start_batch" in caplog.text


def test_unknown_timing_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="cuda_timing"):
        Timer("cuda")


def test_running_stats_and_quantiles_match_exact_values() -> None:
    rng = random.Random(0)
    values = [rng.lognormvariate(-3, 0.5) for _ in range(5000)]
    stats, hist = RunningStats(), LogHistogram()
    for v in values:
        stats.add(v)
        hist.add(v)
    mean = sum(values) / len(values)
    assert stats.mean == pytest.approx(mean)
    assert stats.std == pytest.approx(math.sqrt(sum((v - mean) ** 2 for v in values) / 5000))
    ordered = sorted(values)
    for q in (0.5, 0.95, 0.99):
        exact = ordered[math.ceil(q * 5000) - 1]
        assert hist.quantile(q) == pytest.approx(exact, rel=0.006)


def test_downsampler_keeps_bounded_bucket_means() -> None:
    down = Downsampler(capacity=64)
    for i in range(10_000):
        down.add(i, float(i))
    points = down.points()
    assert len(points) <= 65
    assert down.stride == 256
    # each kept point is the mean of a run of consecutive values starting at its x
    for x, mean in points[:-1]:
        assert mean == pytest.approx(x + (down.stride - 1) / 2)


@pytest.mark.gpu
def test_cuda_timing_modes_agree_on_real_kernels() -> None:
    import torch

    x = torch.randn(2048, 2048, device="cuda")
    results = {}
    for mode in ("sync", "events"):
        timer = Timer(mode)
        timer.start()
        for _ in range(10):
            timer.start_batch()
            for _ in range(10):
                x = (x @ x) / 2048
            timer.end_batch()
        timer.stop()
        results[mode] = timer.batch_stats.mean
    assert results["sync"] > 0.0 and results["events"] > 0.0


def test_the_steady_summary_leaves_the_warm_up_out() -> None:
    clock = FakeClock()
    timer = Timer("none", clock=clock, warmup_batches=2)
    timer.start()
    rng = random.Random(3)
    steps = [0.83, 0.5] + [0.24 + rng.uniform(-0.02, 0.02) for _ in range(300)]
    for step_s in steps:
        clock.sleep(0.01)
        timer.start_batch()
        clock.sleep(step_s - 0.01)
        timer.end_batch(n_samples=32)
    steady = timer.summary()["steady"]
    rest = steps[2:]
    assert steady["warmup_batches"] == 2 and steady["num_batches"] == 300
    assert steady["step_time"]["mean"] == pytest.approx(sum(rest) / 300)
    mean = sum(rest) / 300
    std = math.sqrt(sum((v - mean) ** 2 for v in rest) / 300)
    assert steady["step_time"]["std"] == pytest.approx(std, rel=1e-6)
    ordered = sorted(rest)
    assert steady["step_time"]["p25"] == pytest.approx(ordered[74], rel=0.01)
    assert steady["step_time"]["p75"] == pytest.approx(ordered[224], rel=0.01)
    assert steady["throughput"]["samples_per_s"] == pytest.approx(32 / mean)
    assert timer.summary()["step_time"]["mean"] > steady["step_time"]["mean"] + 0.002
    with pytest.raises(ConfigError, match="warmup_batches"):
        Timer("none", warmup_batches=-1)


def test_values_taken_out_of_the_running_statistics_again() -> None:
    rng = random.Random(1)
    values = [rng.uniform(0.1, 2.0) for _ in range(50)]
    stats, hist = RunningStats(), LogHistogram()
    for v in values:
        stats.add(v)
        hist.add(v)
    rest = values[5:]
    out = stats.without(values[:5])
    assert out.count == 45 and out.mean == pytest.approx(sum(rest) / 45)
    exact = RunningStats()
    for v in rest:
        exact.add(v)
    assert out.std == pytest.approx(exact.std)
    assert hist.without(values[:5]).count == 45 and stats.count == 50  # the original is kept


def test_steps_wait_in_the_buffer_until_a_fold_from_any_thread() -> None:
    import threading

    clock = FakeClock()
    received: list[int] = []
    timer = Timer(
        "none", clock=clock, on_steps=lambda rows: received.extend(r.step for r in rows),
        record_block=1000,
    )  # fmt: skip
    timer.start()
    for i in range(300):
        clock.sleep(0.001)
        timer.start_batch()
        assert timer.position() == (i, pytest.approx(clock.t))  # the open step, at its start
        clock.sleep(0.004)
        assert timer.end_batch() == clock.t  # the clock read at the step's end, returned
        assert timer.position() == (i, pytest.approx(clock.t))
    assert received == []  # the hot path only appended
    folder = threading.Thread(target=timer.fold)
    folder.start()
    folder.join()
    assert received == list(range(300))
    assert timer.batch_stats.count == 300
    assert timer.wait_stats.mean == pytest.approx(0.001)
    assert timer.end_batch() == -math.inf  # without start_batch: ignored


def test_blocks_of_values_give_the_statistics_of_one_value_at_a_time() -> None:
    rng = random.Random(3)
    values = [rng.lognormvariate(-4, 1) for _ in range(1000)] + [0.0, -1.0]
    one, block = RunningStats(), RunningStats()
    hist_one, hist_block = LogHistogram(), LogHistogram()
    down_one, down_block = Downsampler(16, width=2), Downsampler(16, width=2)
    for i, v in enumerate(values):
        one.add(v)
        hist_one.add(v)
        down_one.add(i, v, 2 * v)
    for start in range(0, len(values), 37):  # blocks that straddle the downsampler's buckets
        chunk = values[start : start + 37]
        block.add_many(chunk)
        hist_block.add_many(chunk)
        down_block.add_many(range(start, start + len(chunk)), chunk, [2 * v for v in chunk])
    assert block.to_dict() == pytest.approx(one.to_dict(), rel=1e-9)
    assert hist_block._counts == hist_one._counts and hist_block.count == hist_one.count
    assert hist_block.quantile(0.0) == hist_one.quantile(0.0) == 0.0
    assert down_block.stride == down_one.stride and down_block.count == down_one.count
    flat = [[v for p in d.points() for v in p] for d in (down_block, down_one)]
    assert flat[0] == pytest.approx(flat[1], rel=1e-9)

"""The whole-plan benchmark: its CPU accounting counts DataLoader workers that outlive an epoch;
memory is sampled outside the timed runs."""

from __future__ import annotations

import multiprocessing
import os
import threading
import time

import torch
from bench_loading import load_benchmark


def _burn_then_wait(ready: object, done: object) -> None:
    end = time.process_time() + 0.4
    while time.process_time() < end:
        pass
    ready.set()  # type: ignore[attr-defined]
    done.wait(30)  # type: ignore[attr-defined]


def test_cpu_of_a_child_still_running_is_counted() -> None:
    whole_plan = load_benchmark("whole_plan")
    context = multiprocessing.get_context("fork")
    ready, done = context.Event(), context.Event()
    before = whole_plan._cpu_s()
    child = context.Process(target=_burn_then_wait, args=(ready, done))
    child.start()
    try:
        assert ready.wait(30)
        alive = whole_plan._cpu_s() - before  # the child has not ended: /proc counts it
    finally:
        done.set()
        child.join(30)
    ended = whole_plan._cpu_s() - before  # reaped: its CPU moved to RUSAGE_CHILDREN
    assert alive >= 0.3
    assert abs(ended - alive) < 0.2


def test_a_step_time_holds_each_batch_and_memory_counts_shared_pages_once() -> None:
    whole_plan = load_benchmark("whole_plan")
    batches = [torch.zeros(2, 3)] * 4

    def make(_epoch: int) -> list[torch.Tensor]:
        return batches

    started = time.perf_counter()
    rates, _cpu_ms, digests = whole_plan.run_epochs(make, 2, step_s=0.05)
    assert time.perf_counter() - started >= 8 * 0.05  # two epochs of four batches
    assert len(digests) == 8 and all(rate < 2 / 0.05 for rate in rates)
    # a forked child's anonymous pages are its parent's until written: proportional memory
    # divides them, so the sum over both stays near the parent's own
    parent = whole_plan._anonymous_bytes(os.getpid())
    context = multiprocessing.get_context("fork")
    ready, done = context.Event(), context.Event()
    child = context.Process(target=_wait, args=(ready, done))
    child.start()
    try:
        assert ready.wait(30)
        pid = os.getpid()
        together = whole_plan._anonymous_bytes(pid) + whole_plan._anonymous_bytes(child.pid)
    finally:
        done.set()
        child.join(30)
    assert together < 1.5 * parent  # counted once per process, it would be about twice


def _wait(ready: object, done: object) -> None:
    ready.set()  # type: ignore[attr-defined]
    done.wait(30)  # type: ignore[attr-defined]


def test_timed_runs_do_not_sample_memory() -> None:
    whole_plan = load_benchmark("whole_plan")
    before = threading.active_count()
    with whole_plan._memory(None, sampled=False) as memory:
        assert threading.active_count() == before  # no sampler thread walking /proc
    assert memory.private_bytes == 0 and memory.tier_bytes == 0
    with whole_plan._memory(None, sampled=True) as memory:
        assert threading.active_count() == before + 1
    assert memory.private_bytes > 0


def _section(draws: list[str], override: list[str] | None = None) -> dict[str, object]:
    return {
        "chosen": {"num_workers": 2, "threads": 1},
        "yours": {"num_workers": 0},
        "changed": ["num_workers", "threads"],
        "override": override or [],
        "draws": draws,
        "reason": "2 workers load 1.8x faster",
    }


def _loader_stats(section: dict[str, object], **explicit: object) -> dict[str, object]:
    """The loader patch's counts after one DataLoader is built under it."""
    from torch.utils.data import DataLoader

    from codedag.migrate.loader_settings import LoaderSettingsPatch

    patch = LoaderSettingsPatch.from_plan({"loader": section})
    assert patch is not None
    patch.cuda_available, patch.cpus = False, 8.0
    patch.apply()
    try:
        DataLoader(list(range(8)), batch_size=2, **explicit)
    finally:
        patch.restore()
    return patch.stats()


def test_each_row_says_the_loader_settings_applied_or_kept_and_why() -> None:
    whole_plan = load_benchmark("whole_plan")
    assert whole_plan.loader_line(None, None).startswith("loader: not tuned (--tune)")
    # no sample draws: an explicit worker count is replaced
    section = _section(draws=[])
    line = whole_plan.loader_line(_loader_stats(section, num_workers=0), section)
    assert line == (
        "loader: 2 workers x 1 thread applied to 1 of 1 DataLoaders "
        "(changed: num_workers, threads); replaced explicit num_workers x1 (no sample draws "
        "random numbers)"
    )
    # samples draw from random: an explicit worker count is the pipeline's
    section = _section(draws=["random"])
    line = whole_plan.loader_line(_loader_stats(section, num_workers=0), section)
    assert "kept explicit num_workers x1: the pipeline passes them" in line
    assert "kept for the random draws" not in line and "replaced" not in line
    # the benchmark overrides what the plan changes: the draws still keep the worker count
    overridden = _section(draws=["random"], override=["num_workers"])
    line = whole_plan.loader_line(_loader_stats(overridden, num_workers=0), overridden)
    assert "applied to 0 of 1 DataLoaders" in line and "kept explicit" not in line
    assert "; kept for the random draws num_workers x1 (num_workers: samples draw random" in line
    # left out by the pipeline, the worker count is still kept: another one changes the draws
    line = whole_plan.loader_line(_loader_stats(section), section)
    assert "kept for the random draws num_workers x1 (num_workers: samples draw random " in line
    assert "(random, numpy" not in line and "kept explicit" not in line
    # a plan that keeps the pipeline's settings patches nothing
    kept = {**section, "chosen": {"num_workers": 0}, "changed": []}
    assert whole_plan.loader_line(None, kept) == (
        "loader: kept as the pipeline sets it: 2 workers load 1.8x faster"
    )


def test_bytes_prints_each_cut_and_the_smallest_value_before_it(capsys: object) -> None:
    whole_plan = load_benchmark("whole_plan")

    def cut(position: int, step: str, nbytes: int, dtype: str, prefix_ms: float) -> dict:
        read, write = 20_000 + nbytes // 4, 20_000 + nbytes // 2  # a store's cost per byte
        prefix = int(prefix_ms * 1e6)
        return {
            "step": step, "position": position, "bytes_per_sample": nbytes, "dtype": dtype,
            "shape": [nbytes], "prefix_ns": prefix, "read_ns": read, "write_ns": write,
            "saved_ns": prefix - read,
        }  # fmt: skip

    candidates = [
        cut(0, "numpy.frombuffer", 20_000, "uint8", 0.01),  # reading it back saves nothing
        cut(1, "cv2.imdecode", 720_000, "uint8", 2.0),
        cut(2, "cv2.resize", 519_168, "uint8", 2.5),
        cut(3, "operator.truediv", 2_076_672, "float32", 3.5),
    ]
    chain = {
        "id": "prefix0", "source_function": "numpy.frombuffer", "sources": 8, "samples": 4,
        "candidates": candidates, "cut": candidates[3], "cached": True,
    }  # fmt: skip
    whole_plan.print_bytes("letterbox", {"cache": {"samples": 4, "chains": [chain]}})
    (line,) = capsys.readouterr().out.splitlines()  # type: ignore[attr-defined]
    fields = line.split()
    assert fields[:3] == ["letterbox", "prefix0", "2"]
    assert "truediv (float32 (2076672,))" in line and "resize (uint8)" in line
    # KB per value and per sample, the smaller value's KB, x, the 1 ms of calls after it, and
    # what the 4x bytes add to a read and to storing once
    assert fields[-9:-7] == ["2076.7", "4153.3"]
    assert fields[-5:] == ["519.2", "4.00", "1.000", "0.389", "0.779"]


def test_batches_that_differ_read_tol_only_within_a_placed_calls_tolerance() -> None:
    whole_plan = load_benchmark("whole_plan")
    from codedag.backends.contract import Tolerance

    placed = {"librosa.feature.melspectrogram": Tolerance(atol=1e-5, rtol=1e-5)}
    near = whole_plan._near
    assert near(whole_plan.Difference(2.4e-6, 3.0, placed)) == "tol"
    assert near(whole_plan.Difference(1e-3, 3.0, placed)) == "NO"  # beyond 1e-5 + 1e-5 * 3
    assert near(whole_plan.Difference(1e-9, 3.0, {})) == "NO"  # nothing placed to allow it
    assert near(whole_plan.Difference(float("inf"), 3.0, placed)) == "NO"  # a shape changed
    assert near(None) == "NO"
    row = {"pipeline": "mel", "workers": 0, "difference": whole_plan.Difference(2e-6, 3, placed)}
    line = whole_plan._difference_line(row)
    assert line is not None and "at most 2e-06" in line and "melspectrogram (atol 1e-05" in line

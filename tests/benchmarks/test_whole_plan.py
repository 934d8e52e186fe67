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
    rates, _cpu_ms, digests = whole_plan._epochs(make, 2, step_s=0.05)
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

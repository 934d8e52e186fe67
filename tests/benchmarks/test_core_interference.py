"""The core interference benchmark times both works alone and beside a busy CPU, and stops it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from bench_loading import run_benchmark

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "core_interference.py"


@pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="needs two CPUs")
def test_both_works_are_timed_alone_and_beside_a_busy_cpu() -> None:
    lines = run_benchmark("core_interference", "--rounds", "1")
    assert lines[0].endswith("medians of 1 alternating rounds")
    rows = {line[:12].strip(): line[12:].split() for line in lines[2:]}
    assert set(rows) == {"python loop", "numpy sort"}
    for alone, beside, slowdown in rows.values():
        assert float(alone) > 0 and float(beside) > 0
        # printed from the unrounded medians: the times' rounding to 1 ms moves the ratio by
        # at most 1 ms over the shorter time (both take tens of ms at least)
        assert slowdown.endswith("x")
        ratio = float(beside) / float(alone)
        slack = 0.001 / min(float(alone), float(beside)) * 2 * ratio + 0.005
        assert float(slowdown[:-1]) == pytest.approx(ratio, abs=slack)


def test_one_cpu_is_refused_with_one_line() -> None:
    run = subprocess.run(
        ["taskset", "-c", "0", sys.executable, str(BENCH)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 1
    assert run.stderr.strip() == "core_interference.py: this process may use one CPU only"

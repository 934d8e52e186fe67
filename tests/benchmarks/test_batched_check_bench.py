"""The run-time check benchmark: on the CPU, chains run batched as if the plan had chosen them
are stopped by the check, and the plan's batches stay the original's."""

from __future__ import annotations

import argparse

import pytest
from bench_loading import load_benchmark


@pytest.mark.slow
def test_chains_run_batched_on_the_cpu_are_checked_and_stopped() -> None:
    bench = load_benchmark("batched_check")
    bench.SMALL["demo_image"] = {"image_size": 32, "source_size": 48}
    args = argparse.Namespace(
        workers=0,
        batch_size=4,
        batches=40,
        rounds=1,
        seed=0,
        size=None,
        device="cpu",
        chosen=True,
    )
    row = bench.bench_one("demo_image", args)
    assert row["chains"] >= 1
    assert row["check"]["state"] == "stopped", row["decision"]  # torch per batch loses to cv2
    assert row["check"]["batched_intervals"] >= 2 and row["check"]["per_sample_intervals"] >= 2
    assert row["ratio"] > 0 and row["max_abs_diff"] == 0  # stopped: the pipeline as written
    args.chosen = False
    assert bench.bench_one("demo_image", args)["decision"].startswith("no chain runs batched")

"""The run-time check benchmark: on the CPU, chains run batched as if the plan had chosen them
are stopped by the check, and the plan's batches stay the original's."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def _load() -> ModuleType:
    sys.path.insert(0, str(BENCH))
    try:
        spec = importlib.util.spec_from_file_location("batched_check", BENCH / "batched_check.py")
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(BENCH))


@pytest.mark.slow
def test_chains_run_batched_on_the_cpu_are_checked_and_stopped() -> None:
    bench = _load()
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

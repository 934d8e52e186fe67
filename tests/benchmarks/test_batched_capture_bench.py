"""The capture benchmark on the CPU (the gpu-check rehearsal's ``batched-capture`` step): it runs,
captures each pipeline's segments, and what it counts outside the graphs is less than eager."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench_loading import load_benchmark


@pytest.mark.timeout(300)
def test_capture_benchmark_counts_the_tail_on_the_cpu(tmp_path: Path) -> None:
    bench = load_benchmark("batched_capture")
    out = tmp_path / "capture.json"
    argv = ["--device", "cpu", "--batch-size", "4", "--batches", "2", "--size", "64"]
    assert bench.main([*argv, "--json", str(out)]) == 0
    rows = {r["pipeline"]: r for r in json.loads(out.read_text())}
    assert set(rows) == {"demo_image", "letterbox"}
    for row in rows.values():
        assert row["identical"] and row["capture"]["captured"] >= 1
        assert row["capture"]["replays"] >= 1 and not row["capture"]["refused"]
        assert row["graphs"] >= 1  # the steady batch replayed its segments
        assert 0 < row["captured_aten_ops"] < row["eager_aten_ops"]
        assert "eager_ms" not in row  # no graphs on the CPU: nothing timed
    assert rows["demo_image"]["graphs"] == 2  # before the random flip, and after it

"""The apply-cost benchmark's measurement: one reference scan per apply, whatever the plan holds."""

from __future__ import annotations

import json

from bench_loading import run_benchmark


def test_a_plan_applies_with_one_reference_scan_for_all_its_functions() -> None:
    lines = run_benchmark("apply_cost", "--variant", "plain", "--repeats", "2", timeout=240)
    row = json.loads(lines[-1])
    assert row["scans_per_apply"] == 1  # every placed function found in one pass
    assert row["modules"] > 100 and row["apply_restore_ms"] > 0

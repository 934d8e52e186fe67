"""The apply-cost benchmark's measurement: one reference scan per apply, whatever the plan holds."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "benchmarks" / "apply_cost.py"


def test_a_plan_applies_with_one_reference_scan_for_all_its_functions() -> None:
    command = [sys.executable, str(BENCH), "--variant", "plain", "--repeats", "2"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, check=True)
    row = json.loads(done.stdout.strip().splitlines()[-1])
    assert row["scans_per_apply"] == 1  # every placed function found in one pass
    assert row["modules"] > 100 and row["apply_restore_ms"] > 0

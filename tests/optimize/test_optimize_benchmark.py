"""The scale benchmark script runs end to end on a tiny size (so it does not rot)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "optimizer_scale.py"


@pytest.mark.slow
def test_benchmark_script_prints_every_section(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("optimizer_scale", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--sizes", "400", "1200", "--no-memory", "--batch-size", "8"]) == 0
    out = capsys.readouterr().out
    for section in ("Passes on the full graph", "growth exponent", "METIS", "HEFT"):
        assert section in out

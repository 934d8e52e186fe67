"""Fixtures of the monitor tests."""

from __future__ import annotations

from pathlib import Path

import pytest
from monitor_helpers import record_run


@pytest.fixture
def two_mode_results(tmp_path: Path) -> Path:
    """results.json of a run with a baseline and an optimization mode."""
    return record_run(tmp_path / "run", {"baseline": 1.0, "optimization": 0.9})

"""The summary's prefix cache line says what was stored and what was left for a later epoch."""

from __future__ import annotations

from codedag.integrations.run_results import AcceleratedRun
from codedag.integrations.run_summary import summary_lines
from codedag.integrations.watch import cache_figures


def _cache_line(cache: dict[str, object]) -> str:
    results = AcceleratedRun(loader_index=0, dataset="Photos", plan_status="applied", cache=cache)
    (line,) = [x for x in summary_lines(results) if x.startswith("prefix cache")]
    return line


def test_values_left_for_a_later_epoch_are_said_with_why() -> None:
    stats = {"enabled": True, "hits": 40, "stored": 30, "not_stored_later": 10, "hit_rate": 0.5}
    stats |= {"hit_bytes": 1000, "tiers": [], "read_ms": 1.0}
    line = _cache_line(cache_figures(stats))
    assert line.startswith("prefix cache: 40 hits (50 %), 1,000 bytes read back, 30 values")
    assert "10 left for a later epoch" in line and "storing share" in line


def test_nothing_left_says_nothing_of_it() -> None:
    stats = {"enabled": True, "hits": 4, "stored": 8, "not_stored_later": 0, "hit_rate": 0.5}
    assert "later" not in _cache_line(cache_figures(stats))
    assert _cache_line({"enabled": False}) == "prefix cache: not used"

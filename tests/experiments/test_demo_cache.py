"""The demo's prefix cache: its folder, its summary and the verdict's clause."""

from __future__ import annotations

from pathlib import Path

import numpy as np
from stats_support import cache_stats, tables_stats

import codedag.experiments.demo_cache as demo_cache
from codedag.migrate.stats import Off
from codedag.plan import MigrationPlan
from codedag.store.tiers import PrefixStore, StoreSettings


def _plan(cached: bool = True) -> MigrationPlan:
    chain = {
        "id": "prefix0",
        "source_function": "cv2.imdecode",
        "steps": ["cv2.imdecode", "cv2.resize", "cv2.cvtColor"],
        "cached": cached,
        "cut": {"step": "cv2.resize", "bytes_per_sample": 49152, "saved_ns": 2_500_000},
        "reason": "saves 2.5 ms",
    }
    return MigrationPlan.from_dict(
        {
            "context_device_map": {},
            "cache": {
                "mode": "auto",
                "budget_bytes": 1 << 30,
                "bytes_total": 4 << 20,
                "saved_ns_per_sample": 2_500_000,
                "write_ns_per_sample": 100_000,
                "note": "n",
                "chains": [chain],
            },
        }
    )


def test_settings_point_at_the_demo_folder(tmp_path: Path) -> None:
    settings = demo_cache.cache_settings(tmp_path, enabled=False)
    assert settings.enabled is False
    assert settings.store.folder == tmp_path / demo_cache.FOLDER


def test_clear_frees_what_the_store_holds(tmp_path: Path) -> None:
    store = PrefixStore.open(StoreSettings(folder=tmp_path / demo_cache.FOLDER))
    value = np.arange(4096, dtype=np.uint8)
    store.begin_run()
    store.put(b"k" * 16, value, ())
    assert store.get(b"k" * 16) is not None
    store.close()
    assert demo_cache.clear(tmp_path) > 0
    reopened = PrefixStore.open(StoreSettings(folder=tmp_path / demo_cache.FOLDER))
    assert reopened.get(b"k" * 16) is None
    reopened.close()


def test_summary_in_short_with_the_runs_counters() -> None:
    stats = cache_stats(hits=10, misses={"cold": 4})
    summary = demo_cache.cache_summary(_plan(), stats)
    assert summary is not None
    assert summary.saved_ms_per_sample == 2.5 and summary["write_ms_per_sample"] == 0.1
    assert summary["chains"] == [
        {"id": "prefix0", "steps": ["cv2.imdecode", "cv2.resize", "cv2.cvtColor"],
         "cached": True, "cut": "cv2.resize", "bytes_per_sample": 49152, "saved_ms": 2.5,
         "reason": "saves 2.5 ms"}
    ]  # fmt: skip
    assert summary.stats is stats
    assert demo_cache.cache_summary(_plan(), Off()).stats is None  # type: ignore[union-attr]
    assert (
        demo_cache.cache_summary(MigrationPlan.from_dict({"context_device_map": {}}), stats) is None
    )


def test_clause_names_the_cached_steps_up_to_the_cut() -> None:
    summary = demo_cache.cache_summary(_plan(), cache_stats(hits=3))
    assert demo_cache.cache_clause(summary) == (
        "keeps each sample's deterministic prefix in the prefix cache (prefix0: imdecode > resize)"
    )


def test_clause_says_when_nothing_was_read_back() -> None:
    summary = demo_cache.cache_summary(_plan(), cache_stats(hits=0, misses={"cold": 4}))
    assert demo_cache.cache_clause(summary).endswith("read nothing back from it (misses: cold 4)")
    nothing = demo_cache.cache_summary(_plan(), Off())
    assert demo_cache.cache_clause(nothing).endswith("(misses: none)")


def test_no_clause_without_a_cached_chain() -> None:
    assert demo_cache.cache_clause(demo_cache.cache_summary(_plan(cached=False), Off())) == ""
    assert demo_cache.cache_clause(None) == ""


def test_summary_carries_the_lookup_tables_counts_and_the_cli_prints_them() -> None:
    from rich.console import Console

    from codedag.cli.demo import print_cache

    tables = tables_stats(runs=9, gathered=6, computed=3, mismatches=0)
    summary = demo_cache.cache_summary(_plan(), cache_stats(hits=3), tables)
    assert summary is not None and summary.tables is tables
    assert demo_cache.cache_summary(_plan(), Off(), Off()).tables is None  # type: ignore[union-attr]
    console = Console(record=True, width=200)
    print_cache(summary, console)
    assert (
        "lookup tables (cv2.warpAffine): 9 runs, 6 gathered through a table, 3 computed by "
        "their calls (0 mismatches)"
    ) in console.export_text()

"""The demo's prefix cache: its own folder, emptied around the optimized run, and its summary.

The optimized run keeps each sample's deterministic prefix (docs/cache.md) in ``prefix-cache``
under the demo's output folder. It is emptied before the run, so the first epoch computes every
value and stores them (all, or as many as its pace allows) as a first run does, and after it, so
nothing stays in shared memory (the RAM tier lives in ``/dev/shm``). Its summary (the plan's cuts and the run's hits and misses)
goes into ``demo_summary.json``, the terminal summary and the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from codedag.experiments.demo_settings import CacheChainSummary, CacheSummary
from codedag.migrate.stats import CacheStats, Off, TablesStats
from codedag.plan import MigrationPlan

FOLDER = "prefix-cache"


def cache_settings(out_dir: Path, enabled: bool) -> Any:
    """The migrator's cache settings: the demo's folder (``enabled=False``: no cache)."""
    from codedag.migrate.cache.runtime import CacheSettings
    from codedag.store.tiers import StoreSettings

    return CacheSettings(enabled=enabled, store=StoreSettings(folder=out_dir / FOLDER))


def clear(out_dir: Path) -> int:
    """Delete both tiers of the demo's cache; returns the bytes freed."""
    from codedag.store.tiers import PrefixStore, StoreSettings

    return PrefixStore.open(StoreSettings(folder=out_dir / FOLDER)).clear()


def cache_summary(
    plan: MigrationPlan, stats: CacheStats | Off, tables: TablesStats | Off | None = None
) -> CacheSummary | None:
    """The plan's cache section in short, with the run's counters and those of its lookup
    tables (``tables``: ``get_stats()["tables"]``; None: no cache section)."""
    section = plan.cache
    if section is None:
        return None
    chains = [
        CacheChainSummary(
            id=c.id,
            steps=list(c.steps),
            cached=c.cached,
            cut=c.cut.step if c.cached and c.cut is not None else None,
            bytes_per_sample=c.cut.bytes_per_sample if c.cut is not None else 0,
            saved_ms=(c.cut.saved_ns if c.cut is not None else 0) / 1e6,
            reason=c.reason,
        )
        for c in section.chains
    ]
    return CacheSummary(
        mode=section.mode,
        budget_bytes=section.budget_bytes,
        bytes_total=section.bytes_total,
        saved_ms_per_sample=section.saved_ns_per_sample / 1e6,
        write_ms_per_sample=section.write_ns_per_sample / 1e6,
        note=section.note,
        chains=chains,
        stats=stats if isinstance(stats, CacheStats) and stats.enabled else None,
        tables=tables if isinstance(tables, TablesStats) and tables.enabled else None,
        first_epoch=section.first_epoch,
    )


def _short(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def cache_clause(summary: CacheSummary | None) -> str:
    """What the cache did, in words for the verdict (``""``: nothing was cached)."""
    cached = [c for c in summary.chains if c.cached] if summary is not None else []
    if summary is None or not cached:
        return ""
    described = "; ".join(
        f"{c.id}: {' > '.join(_short(s) for s in c.steps[: c.steps.index(c.cut) + 1])}"
        if c.cut in c.steps
        else c.id
        for c in cached
    )
    stats = summary.stats
    if stats is None or not stats.hits:
        misses = stats.misses if stats is not None else {}
        listed = ", ".join(f"{k} {v}" for k, v in misses.items()) or "none"
        return (
            f"planned the prefix cache for {described}, but the run read nothing back from it "
            f"(misses: {listed})"
        )
    return f"keeps each sample's deterministic prefix in the prefix cache ({described})"

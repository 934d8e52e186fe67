"""The demo's prefix cache: its own folder, emptied around the optimized run, and its summary.

The optimized run keeps each sample's deterministic prefix (docs/cache.md) in ``prefix-cache``
under the demo's output folder. It is emptied before the run, so the first epoch computes and
stores every value as a first run does, and after it, so nothing stays in shared memory (the
RAM tier lives in ``/dev/shm``). Its summary (the plan's cuts and the run's hits and misses)
goes into ``demo_summary.json``, the terminal summary and the report.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from codedag.experiments.demo_settings import CacheChainSummary, CacheSummary
from codedag.migrate.stats import CacheStats, Off, TablesStats

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
    plan: dict[str, Any], stats: CacheStats | Off, tables: TablesStats | Off | None = None
) -> CacheSummary | None:
    """The plan's cache section in short, with the run's counters and those of its lookup
    tables (``tables``: ``get_stats()["tables"]``; None: no cache section)."""
    section = plan.get("cache")
    if not section:
        return None
    chains = [
        CacheChainSummary(
            id=c["id"],
            steps=list(c.get("steps", [])),
            cached=bool(c.get("cached")),
            cut=(c.get("cut") or {}).get("step") if c.get("cached") else None,
            bytes_per_sample=(c.get("cut") or {}).get("bytes_per_sample", 0),
            saved_ms=(c.get("cut") or {}).get("saved_ns", 0) / 1e6,
            reason=c.get("reason", ""),
        )
        for c in section.get("chains", [])
    ]
    return CacheSummary(
        mode=section.get("mode", "auto"),
        budget_bytes=section.get("budget_bytes", 0),
        bytes_total=section.get("bytes_total", 0),
        saved_ms_per_sample=section.get("saved_ns_per_sample", 0) / 1e6,
        write_ms_per_sample=section.get("write_ns_per_sample", 0) / 1e6,
        note=section.get("note", ""),
        chains=chains,
        stats=stats if isinstance(stats, CacheStats) and stats.enabled else None,
        tables=tables if isinstance(tables, TablesStats) and tables.enabled else None,
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

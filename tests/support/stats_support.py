"""A stats file saved by ``get_stats().model_dump(mode="json")`` before the run-time parts'
figures were models (a full plan, 2 workers, 2 epochs), and parts of it with figures changed."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from codedag.migrate.stats import BatchedStats, CacheStats, TablesStats

SAVED = Path(__file__).parent / "data" / "saved_stats.json"


def saved_stats() -> dict[str, Any]:
    """The saved file's dict."""
    return json.loads(SAVED.read_text())


def cache_stats(**figures: Any) -> CacheStats:
    """The saved run's cache figures with ``figures`` in their place."""
    return CacheStats.model_validate(saved_stats()["cache"] | figures)


def tables_stats(**figures: Any) -> TablesStats:
    """The saved run's lookup tables' figures with ``figures`` in their place."""
    return TablesStats.model_validate(saved_stats()["tables"] | figures)


def batched_stats(**figures: Any) -> BatchedStats:
    """The saved run's batched figures with ``figures`` in their place."""
    return BatchedStats.model_validate(saved_stats()["batched"] | figures)

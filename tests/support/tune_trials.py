"""Trials with made-up measurements, for the choice and search rules (no loader is timed)."""

from __future__ import annotations

from typing import Any

from codedag.plan.loader import LoaderSettings
from codedag.tune.limits import MachineLimits
from codedag.tune.measure import TrialRun
from codedag.tune.options import TuneOptions
from codedag.tune.search import Search, Trial, settings_key


def intervals(center_s: float, spread: float = 0.01) -> list[float]:
    """Eight cycle intervals around ``center_s`` (relative spread ``spread``)."""
    offsets = (-2, 1, 0, 2, -1, 0, 1, -1)
    return [center_s * (1 + spread * k / 2) for k in offsets]


def trial(interval_s: float, wait_s: float = 0.0, phase: str = "workers", **settings: Any) -> Trial:
    chosen = LoaderSettings(**settings)
    run = TrialRun(chosen, intervals_s=intervals(interval_s), waits_s=[wait_s] * 8, batches=16)
    return Trial(chosen, phase, run)


def search_of(*trials: Trial, yours: LoaderSettings | None = None, **options: Any) -> Search:
    """A search whose trials are ``trials`` (the first is yours unless ``yours`` is given)."""
    limits = MachineLimits(
        cpus=4, cpu_source="test", memory_limit_bytes=None, available_bytes=2**30
    )
    mine = yours if yours is not None else trials[0].settings
    search = Search(None, mine, TuneOptions(**options), limits, {}, None, lambda _: None)
    for t in trials:
        search.trials[settings_key(t.settings)] = t
    return search

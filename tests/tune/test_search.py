"""The loader search: which settings each phase times, that a setting is timed once, and that
settings over the memory left or the time budget are not started."""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset
from tune_trials import search_of, trial

from codedag.plan.loader import LoaderSettings
from codedag.tune.measure import TrialRun
from codedag.tune.search import Search, Trial, settings_key


class Recording(Search):
    """A search that records what it would time, with made-up intervals per worker count."""

    def measure(self, settings: LoaderSettings, phase: str) -> Trial:
        self.asked: list[tuple[str, LoaderSettings]] = getattr(self, "asked", [])
        self.asked.append((phase, settings))
        made = trial(0.1 / (1 + settings.num_workers), phase=phase, **settings.model_dump())
        self.trials[settings_key(settings)] = made
        return made


def _recording(**options: Any) -> Recording:
    base = search_of(yours=LoaderSettings(), **options)
    search = Recording(None, base.yours, base.options, base.limits, {}, None, lambda _: None)
    return search


def test_equal_settings_share_a_key_whatever_their_spelling() -> None:
    assert settings_key(LoaderSettings(num_workers=2, prefetch_factor=2)) == settings_key(
        LoaderSettings(num_workers=2)
    )
    assert settings_key(LoaderSettings(prefetch_factor=4)) == settings_key(LoaderSettings())
    assert settings_key(LoaderSettings(num_workers=1)) != settings_key(LoaderSettings())


def test_a_trial_is_usable_only_when_measured_fully() -> None:
    assert trial(0.1).usable
    assert not Trial(LoaderSettings(), "yours").usable
    short = Trial(LoaderSettings(), "yours", TrialRun(LoaderSettings(), intervals_s=[0.1]))
    assert not short.usable
    stopped = trial(0.1)
    stopped.status = "stopped early"
    failed = trial(0.1)
    failed.run.error = "OSError"  # type: ignore[union-attr]
    assert not stopped.usable and not failed.usable


def test_the_best_is_the_usable_trial_with_the_shortest_interval() -> None:
    fast_but_stopped = trial(0.01, num_workers=3)
    fast_but_stopped.status = "stopped early"
    search = search_of(trial(0.1), trial(0.05, num_workers=1), fast_but_stopped)
    assert search.best().settings.num_workers == 1  # type: ignore[union-attr]
    assert search.trial_of(LoaderSettings(num_workers=3)) is fast_but_stopped


def test_the_phases_vary_one_setting_around_the_best_so_far() -> None:
    search = _recording(max_workers=2, prefetch_factors=(4,))
    search.run()
    asked = [(phase, s.num_workers, s.threads, s.prefetch_factor) for phase, s in search.asked]
    assert asked == [
        ("yours", 0, None, None),
        ("workers", 0, None, None),
        ("workers", 1, 1, None),
        ("workers", 2, 1, None),
        ("threads", 2, None, None),
        ("threads", 2, 1, None),
        ("threads", 2, 2, None),  # 4 CPUs // 2 workers
        ("prefetch", 2, 1, 4),
    ]  # no pin_memory phase without a CUDA device
    assert search.planned_batches() >= 8 * search.options.batches


def test_a_timed_setting_is_not_timed_again() -> None:
    yours = trial(0.1, phase="yours")
    search = search_of(yours)
    assert search.measure(LoaderSettings(), "workers") is yours


def test_workers_that_would_not_fit_in_memory_are_not_started() -> None:
    measured = trial(0.05, num_workers=1)
    measured.run.worker_rss_bytes = 2**29  # type: ignore[union-attr]  # 512 MiB per worker
    search = search_of(trial(0.1), measured)  # 1 GiB left
    over = search.measure(LoaderSettings(num_workers=2), "workers")
    assert over.status == "over memory" and over.run is None
    assert "2 workers would need about 1024 MiB" in over.note


def test_after_the_budget_only_your_settings_are_timed() -> None:
    loader = DataLoader(TensorDataset(torch.arange(64.0)), batch_size=4)
    search = search_of(yours=LoaderSettings(), budget_s=0.0, batches=4)
    search.loader = loader
    late = search.measure(LoaderSettings(num_workers=1), "workers")
    assert late.status == "not measured" and late.run is None
    assert "time budget" in search.budget_note
    yours = search.measure(LoaderSettings(), "yours")
    assert yours.usable and yours.run.batches >= 4  # type: ignore[union-attr]

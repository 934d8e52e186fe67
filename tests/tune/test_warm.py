"""Loader settings for epochs the prefix cache serves, measured with the cache warm."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prefix_support import FileImages, cache_section, write_images
from torch.utils.data import DataLoader

import codedag.tune.choice as choice
import codedag.tune.warm as warm
from codedag.errors import ConfigError
from codedag.plan.loader import LoaderSection, LoaderSettings
from codedag.tune import TuneOptions

COLD = LoaderSettings(num_workers=2, persistent_workers=True)


def _plan(cold: LoaderSettings = COLD, cache: bool = True) -> dict[str, Any]:
    section = LoaderSection(chosen=cold, yours=LoaderSettings(), changed=["num_workers"])
    plan: dict[str, Any] = {"context_device_map": {}, "loader": section.model_dump(mode="json")}
    if cache:
        plan["cache"] = cache_section()
    return plan


def _options() -> TuneOptions:
    return TuneOptions(batches=4, rounds=1, trial_s=1.0)


@pytest.fixture
def loader(tmp_path: Path) -> DataLoader[Any]:
    return DataLoader(FileImages(write_images(tmp_path / "images", n=16)), batch_size=4)


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
@pytest.mark.parametrize("faster", [True, False])
def test_in_process_loading_is_chosen_only_when_measured_faster_with_every_lookup_a_hit(
    loader: DataLoader[Any], faster: bool, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    judged: list[tuple[list[float], list[float]]] = []

    def beats(candidate: list[float], yours: list[float], margin: float) -> bool:
        judged.append((candidate, yours))
        return faster

    monkeypatch.setattr(choice, "beats", beats)
    monkeypatch.setattr(warm.tempfile, "tempdir", str(tmp_path))
    result = warm.tune_warm(loader, _plan(), _options(), judge_after=0)
    again = "measured again in 2 rounds" in result.reason  # a gain within the noise (choice)
    assert len(judged) == (2 if again else 1) and all(judged[-1])  # both sides timed
    assert not (faster and again)
    assert result.hit_rate == 1.0  # the timed batches were stored first
    assert result.batches == 4  # two cycles of 2 workers, within the epoch of 4 batches
    assert [t.settings.num_workers for t in result.trials] == [2, 0]
    assert all(t.status == "measured" and t.batches_per_s > 0 for t in result.trials)
    assert result.confirmation is not None  # a warm epoch has no first epoch to compare
    assert result.confirmation.first_epoch_ratio is None
    if faster:
        assert result.chosen.num_workers == 0
        assert {"num_workers", "persistent_workers"} <= set(result.changed)
        assert "load in-process" in result.reason
    else:
        assert result.chosen == COLD and not result.changed
        assert "keep 2 workers" in result.reason
    assert not list(tmp_path.glob("codedag-warm-*"))  # its store is removed


def test_a_first_epoch_in_process_has_nothing_to_switch(loader: DataLoader[Any]) -> None:
    result = warm.tune_warm(loader, _plan(LoaderSettings()), _options())
    assert not result.changed and "nothing to switch" in result.reason


def test_a_plan_that_caches_nothing_is_refused(loader: DataLoader[Any]) -> None:
    with pytest.raises(ConfigError, match="caches nothing"):
        warm.tune_warm(loader, _plan(cache=False), _options())


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:This DataLoader will create")
def test_a_chain_the_cache_gives_up_measures_no_warm_epoch_and_keeps_the_workers(
    loader: DataLoader[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    from codedag.migrate.cache.session import Session

    monkeypatch.setattr(choice, "beats", lambda *_a, **_k: True)  # in process measured faster
    judge = Session.judge  # storing a value is judged to cost more than computing it: given up
    monkeypatch.setattr(Session, "judge", lambda self, chain, _c, s: judge(self, chain, 0, s + 1))
    result = warm.tune_warm(loader, _plan(), _options(), judge_after=1)
    assert result.hit_rate < 0.9
    assert result.chosen == COLD and not result.changed
    assert "of the timed lookups were hits" in result.reason

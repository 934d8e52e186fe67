"""Choosing a loader setting: with a step time, the cheapest that keeps the step fed (yours if
it does); without one, the cheapest as fast as the fastest; persistent workers only when the
start-up is a real share of an epoch."""

from __future__ import annotations

import statistics

import pytest
from torch.utils.data import DataLoader
from tune_trials import intervals, search_of, trial

import codedag.tune.choice as choice
from codedag.plan.loader import LoaderConfirmation, LoaderSettings
from codedag.tune.choice import beats, fast_enough, first_epoch_beats, persistent_decision, pick
from codedag.tune.measure import TrialRun
from codedag.tune.options import TuneOptions
from codedag.tune.search import Trial


def test_fast_enough_means_waiting_under_five_percent_of_the_step() -> None:
    assert fast_enough(trial(0.01, wait_s=0.004), step_s=0.1)
    assert not fast_enough(trial(0.01, wait_s=0.006), step_s=0.1)
    assert not fast_enough(Trial(LoaderSettings(), "yours"), step_s=0.1)  # never timed


def test_with_a_step_time_your_settings_stay_when_they_keep_it_fed() -> None:
    yours = trial(0.02, wait_s=0.001, phase="yours")
    faster = trial(0.005, num_workers=2)
    chosen = pick(search_of(yours, faster), step_s=0.1, margin=0.05)
    assert chosen.trial is yours and "already keep" in chosen.why


def test_with_a_step_time_the_cheapest_setting_that_keeps_it_fed_wins() -> None:
    yours = trial(0.2, wait_s=0.1, phase="yours")
    two = trial(0.05, wait_s=0.001, num_workers=2)
    four = trial(0.03, wait_s=0.0, num_workers=4)
    chosen = pick(search_of(yours, four, two), step_s=0.1, margin=0.05)
    assert chosen.trial is two and "cheapest setting that keeps" in chosen.why
    starved = pick(search_of(yours, trial(0.15, wait_s=0.05, num_workers=1)), 0.1, 0.05)
    assert starved.trial.settings.num_workers == 1 and "bottleneck" in starved.why


def test_without_a_step_time_the_cheapest_as_fast_as_the_fastest_wins() -> None:
    yours = trial(0.1, phase="yours")
    two = trial(0.0502, num_workers=2, threads=1)
    three = trial(0.05, num_workers=3, threads=1)  # not clearly faster than two workers
    chosen = pick(search_of(yours, two, three), step_s=None, margin=0.05)
    assert chosen.trial is two


def test_your_settings_stay_when_nothing_clearly_beats_them() -> None:
    yours = trial(0.05, phase="yours")
    chosen = pick(search_of(yours, trial(0.0499, num_workers=2)), step_s=None, margin=0.05)
    assert chosen.trial is yours and "beats your settings" in chosen.why


def test_nothing_timed_keeps_your_settings() -> None:
    chosen = pick(search_of(yours=LoaderSettings()), step_s=None, margin=0.05)
    assert chosen.trial.settings == LoaderSettings() and chosen.why == "no setting could be timed"


def test_beats_needs_more_than_the_margin() -> None:
    assert beats(intervals(0.05), intervals(0.1), margin=0.05)
    assert not beats(intervals(0.098), intervals(0.1), margin=0.05)


def test_persistent_workers_when_start_up_is_a_real_share_of_an_epoch() -> None:
    loader = DataLoader(list(range(40)), batch_size=4)  # 10 batches an epoch
    settings = LoaderSettings(num_workers=2)
    costly = TrialRun(settings, intervals_s=[0.01] * 4, startup_s=0.5)
    keep, why = persistent_decision(
        loader, Trial(settings, "workers", costly), LoaderSettings(), 0.05
    )
    assert keep and "persistent workers" in why
    cheap = TrialRun(settings, intervals_s=[0.01] * 4, startup_s=0.012)
    keep, why = persistent_decision(
        loader, Trial(settings, "workers", cheap), LoaderSettings(), 0.05
    )
    assert not keep and "not kept" in why
    none = persistent_decision(
        loader, Trial(LoaderSettings(), "yours", cheap), LoaderSettings(), 0.05
    )
    assert none == (False, "")


def test_a_first_epoch_is_timed_to_its_last_batch_start_up_included() -> None:
    settings = LoaderSettings(num_workers=2)
    run = TrialRun(settings, intervals_s=[0.05] * 3, arrivals_s=[0.4, 0.41, 0.45, 0.5, 0.55])
    assert run.first_epoch_s(3) == pytest.approx(0.45)  # within the round: as measured
    assert run.first_epoch_s(10) == pytest.approx(0.55 + 5 * 0.05)  # the rest at the rate
    assert run.first_epoch_s(0) is None and TrialRun(settings).first_epoch_s(3) is None
    side_by_side = LoaderConfirmation(
        rounds=2,
        ratio=2.0,
        first_epoch_batches=3,
        yours_first_epoch_s=0.3,
        chosen_first_epoch_s=0.45,
    )
    assert side_by_side.first_epoch_ratio == pytest.approx(0.3 / 0.45)
    assert LoaderConfirmation(rounds=2, ratio=2.0).first_epoch_ratio is None


@pytest.mark.parametrize(
    ("chosen", "yours", "beats_yours"),
    [
        ([0.20, 0.21], [0.27, 0.28], True),  # faster in every round, beyond the margin
        ([0.20, 0.26], [0.27, 0.28], True),  # the rounds disagree by how much, not which is faster
        ([0.15, 0.29, 0.20], [0.27, 0.28, 0.27], False),  # faster by the medians, slower in a round
        ([0.26, 0.265], [0.27, 0.28], False),  # faster by less than the 5 % margin
        ([0.30, 0.31], [0.27, 0.28], False),  # slower
        ([0.20], [0.27], True),  # one round: the margin alone decides
        ([0.26], [0.27], False),
    ],
)
def test_a_first_epoch_must_be_faster_beyond_the_margin_and_in_every_round(
    chosen: list[float], yours: list[float], beats_yours: bool
) -> None:
    confirmation = LoaderConfirmation(
        rounds=len(chosen),
        first_epoch_batches=6,
        yours_first_epoch_s=statistics.median(yours),  # as the confirmation keeps them
        chosen_first_epoch_s=statistics.median(chosen),
        yours_first_epochs_s=yours,
        chosen_first_epochs_s=chosen,
    )
    assert first_epoch_beats(confirmation, margin=0.05) is beats_yours
    assert first_epoch_beats(LoaderConfirmation(rounds=2), margin=0.05) is None  # not timed


@pytest.mark.parametrize(
    ("first", "second", "measured", "kept_note"),
    [
        ((True, 2.0), None, [2], False),  # faster at once: decided
        ((False, 1.03), None, [2], False),  # within the margin: nothing to gain, decided
        ((False, 1.87), (True, 1.9), [2, 4], True),  # a gain within the noise: again, faster
        ((False, 1.87), (False, 0.8), [2, 4], True),  # again, and not faster after all
    ],
)
def test_a_gain_within_the_noise_is_measured_again_with_twice_the_rounds(
    first: tuple[bool, float],
    second: tuple[bool, float] | None,
    measured: list[int],
    kept_note: bool,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    outcomes = [first] if second is None else [first, second]
    rounds: list[int] = []
    grown: list[int] = []

    def confirm(sides, options):  # type: ignore[no-untyped-def]
        rounds.append(options.rounds)
        faster, ratio = outcomes[len(rounds) - 1]
        pooled = [0.01 if faster else 0.02]
        return pooled, [0.02], LoaderConfirmation(rounds=options.rounds, ratio=ratio)

    monkeypatch.setattr(choice, "_confirm", confirm)
    monkeypatch.setattr(choice, "beats", lambda candidate, yours, margin: candidate == [0.01])
    options = TuneOptions(rounds=2, batches=4)
    *_pooled, confirmation, faster, note = choice.confirm_decided(
        None, LoaderSettings(), LoaderSettings(num_workers=2), options, None, print,
        more_batches=grown.append,
    )  # fmt: skip
    assert rounds == measured
    assert faster is (second or first)[0] and confirmation.rounds == measured[-1]
    assert bool(note) is kept_note
    if kept_note:
        assert note == "measured again in 4 rounds: 2 had left a 1.87x gain within the noise"
        assert grown == [4 * 2 * 4]

"""Choose among the timed settings, confirm against the program's own, and say why.

* Without a step time, the worker count is the cheapest whose best setting is as fast as the
  fastest (slower neither beyond the noise nor beyond the margin); at that
  count, threads, prefetch and pinning take their cheapest values unless a costlier one clearly
  beats them (beyond the noise and the margin): their effects are small next to the noise of
  short runs, and the fastest of several noisy measurements is flattered by its noise.
* With a step time, the loader only has to keep the step fed: when your settings already do
  (the step waits less than 5 % of its time for data), they are kept; otherwise the cheapest
  setting that does is the candidate, else the fastest.
* The candidate then runs against your settings in interleaved rounds (A B, B A, ..., fresh
  loaders); it replaces them only when it is faster by more than the margin and the noise, and
  when it also loads a first epoch faster by more than the margin: each round times ``iter()``
  to the epoch's last batch (start-up and the workers' first cycles included; batches past
  those the round took at its measured rate). Workers that start in 0.2 s do not pay for
  themselves in an epoch of a few batches. So the plan never makes the loader slower than the
  program made it, in the first epoch or after.

Every comparison is the rule of :mod:`codedag.measure` on the medians of cycle intervals
(:mod:`codedag.tune.stats`).
* ``persistent_workers`` is turned on when the measured worker start-up, paid again at every
  epoch without it, is more than the margin of an epoch's time.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from codedag.measure.pair import round_order
from codedag.plan.loader import DEFAULT_PREFETCH, LoaderConfirmation, LoaderSettings
from codedag.tune.measure import Consumer, TrialRun, run_trial
from codedag.tune.options import MAX_ROUNDS
from codedag.tune.search import Search, Trial, as_fast, fast_enough
from codedag.tune.stats import clearly_faster, compare, median_s
from codedag.tune.variants import build_variant, epoch_length

if TYPE_CHECKING:
    from torch.utils.data import DataLoader

    from codedag.tune.options import TuneOptions


def _cost(trial: Trial) -> tuple[Any, ...]:
    """What a setting costs the machine: workers, threads (the default is one per core), the
    batches it holds, pinned memory, then its workers' measured memory."""
    s = trial.settings.normalized()
    run = trial.run
    memory = 0 if run is None else (run.worker_uss_bytes or run.worker_rss_bytes)
    threads = math.inf if s.threads is None else s.threads
    prefetch = DEFAULT_PREFETCH if s.prefetch_factor is None else s.prefetch_factor
    return (s.num_workers, threads, prefetch, s.pin_memory, memory)


@dataclass
class Candidate:
    """The setting picked from the search, and the words for why."""

    trial: Trial
    why: str


def pick(search: Search, step_s: float | None, margin: float) -> Candidate:
    """The candidate setting (see the module docstring)."""
    yours = search.trial_of(search.yours)
    best = search.best()
    if best is None or best.run is None:
        return Candidate(yours or Trial(search.yours, "yours"), "no setting could be timed")
    usable = [t for t in search.trials.values() if t.usable]
    if step_s is not None and step_s > 0:
        if yours is not None and fast_enough(yours, step_s):
            assert yours.run is not None
            return Candidate(
                yours,
                f"your settings already keep a {step_s * 1e3:.1f} ms step fed (it waits "
                f"{yours.run.wait_s * 1e3:.2f} ms per batch for data): the loader only has to "
                "keep the accelerator busy, so nothing changes",
            )
        enough = sorted((t for t in usable if fast_enough(t, step_s)), key=_cost)
        if enough:
            chosen = enough[0]
            assert chosen.run is not None
            return Candidate(
                chosen,
                f"the cheapest setting that keeps a {step_s * 1e3:.1f} ms step fed (it waits "
                f"{chosen.run.wait_s * 1e3:.2f} ms per batch for data): more workers or threads "
                "would only take CPU and memory",
            )
        return Candidate(
            best,
            f"no setting keeps a {step_s * 1e3:.1f} ms step fed; this one is the fastest (the "
            f"step still waits {best.run.wait_s * 1e3:.1f} ms per batch): the loader is the "
            "bottleneck, see `codedag trace` and `codedag optimize` for its slow calls",
        )
    # The worker count first: the cheapest count whose best setting is as fast as the fastest
    # (neither beyond the noise nor beyond the margin slower). Its speed is then confirmed
    # against yours with more data, side by side.
    level1 = [t for t in usable if as_fast(t, best, margin, strict=True)]
    if yours is not None and yours in level1:
        return Candidate(yours, "no measured setting beats your settings by more than the noise")
    workers = min(level1, key=_cost).settings.num_workers
    # Then threads, prefetch, pinning: their effects are small next to the noise of short runs,
    # so a costlier value must clearly beat the cheaper ones (beyond the noise and the margin).
    same = [t for t in usable if t.settings.num_workers == workers]
    fastest = min(same, key=lambda t: t.run.interval_s)  # type: ignore[union-attr]
    level2 = [t for t in same if as_fast(t, fastest, margin, strict=False)]
    if yours is not None and yours in level2:
        return Candidate(yours, "no measured setting beats your settings by more than the noise")
    chosen = min(level2, key=_cost)
    why = "the fastest setting measured"
    if chosen is not best:
        why = (
            "the cheapest setting the fastest measured "
            f"({best.settings.label()}) does not clearly beat"
        )
    return Candidate(chosen, why)


@dataclass(frozen=True)
class _SideBySide:
    """Yours and the candidate, timed on ``loader`` the same way (``first_epoch``: each side's
    time to load the loader's first epoch too)."""

    loader: DataLoader[Any]
    yours: LoaderSettings
    candidate: LoaderSettings
    consumer: Consumer | None
    tick: Callable[[str], None]
    first_epoch: bool


def _confirm(
    sides: _SideBySide, options: TuneOptions
) -> tuple[list[float], list[float], LoaderConfirmation]:
    """Time yours and the candidate in ``options.rounds`` interleaved rounds of
    ``options.batches`` batches (at most ``options.trial_s`` each); pooled cycle intervals of
    each, and each side's time to load the loader's first epoch where ``sides`` asks."""
    loader, yours, candidate = sides.loader, sides.yours, sides.candidate
    consumer, tick, first_epoch = sides.consumer, sides.tick, sides.first_epoch
    rounds, batches, max_s = options.rounds, options.batches, options.trial_s
    pooled: dict[str, list[float]] = {"yours": [], "candidate": []}
    epoch = (epoch_length(loader) or 0) if first_epoch else 0
    first_epochs: dict[str, list[float]] = {"yours": [], "candidate": []}
    ways = [("yours", yours), ("candidate", candidate)]
    for index in range(rounds):
        for name, settings in round_order(ways, index):
            run: TrialRun = run_trial(
                lambda s=settings: build_variant(loader, s, endless=True),  # type: ignore[misc]
                settings,
                max_batches=batches,
                max_s=max_s,
                consumer=consumer,
                on_batch=lambda: tick("side by side with your settings"),
            )
            pooled[name].extend(run.intervals_s)
            elapsed = run.first_epoch_s(epoch)
            if elapsed is not None:
                first_epochs[name].append(elapsed)
    yours_bps, cand_bps = _per_s(pooled["yours"]), _per_s(pooled["candidate"])
    ratio, spread = (cand_bps / yours_bps if yours_bps else 1.0), 0.0
    if pooled["yours"] and pooled["candidate"]:
        judged = compare(pooled["yours"], pooled["candidate"])
        ratio, spread = judged.speedup, judged.speedup_se
    confirmation = LoaderConfirmation(
        rounds=rounds,
        yours_batches_per_s=yours_bps,
        chosen_batches_per_s=cand_bps,
        ratio=ratio,
        stderr_ratio=spread if math.isfinite(spread) else 0.0,
        first_epoch_batches=epoch,
        yours_first_epoch_s=_median(first_epochs["yours"]),
        chosen_first_epoch_s=_median(first_epochs["candidate"]),
        yours_first_epochs_s=first_epochs["yours"],
        chosen_first_epochs_s=first_epochs["candidate"],
    )
    return pooled["candidate"], pooled["yours"], confirmation


def confirm_decided(
    loader: DataLoader[Any],
    yours: LoaderSettings,
    candidate: LoaderSettings,
    options: TuneOptions,
    consumer: Consumer | None,
    tick: Callable[[str], None],
    first_epoch: bool = True,
    more_batches: Callable[[int], None] | None = None,
) -> tuple[list[float], list[float], LoaderConfirmation, bool, str]:
    """Yours and the candidate timed side by side, judged by :func:`beats`; where the
    candidate measured faster by more than the margin but not beyond the noise, timed once more
    with twice the rounds, and that measurement decides (on a busy machine two rounds once left
    a 1.87x gain within the noise).

    Returns:
        The candidate's and your pooled intervals, the confirmation, whether the candidate beats
        yours, and a note saying it was measured again (empty if not).
    """
    margin = options.margin_pct / 100.0
    sides = _SideBySide(loader, yours, candidate, consumer, tick, first_epoch)
    theirs, mine, confirmation = _confirm(sides, options)
    faster = beats(theirs, mine, margin=margin)
    if faster or confirmation.ratio <= 1.0 + margin or options.rounds >= MAX_ROUNDS:
        return theirs, mine, confirmation, faster, ""
    more = dataclasses.replace(options, rounds=min(2 * options.rounds, MAX_ROUNDS))
    if more_batches is not None:
        more_batches(more.rounds * 2 * options.batches)
    note = (
        f"measured again in {more.rounds} rounds: {options.rounds} had left a "
        f"{confirmation.ratio:.2f}x gain within the noise"
    )
    theirs, mine, confirmation = _confirm(sides, more)
    return theirs, mine, confirmation, beats(theirs, mine, margin=margin), note


def _median(seconds: list[float]) -> float:
    return statistics.median(seconds) if seconds else 0.0


def _per_s(intervals_s: list[float]) -> float:
    """Batches per second at the median interval (0 without a positive one)."""
    interval = median_s(intervals_s) if intervals_s else 0.0
    return 1.0 / interval if interval > 0 else 0.0


def beats(candidate: list[float], yours: list[float], margin: float) -> bool:
    """Whether the candidate's pooled intervals beat yours beyond noise and margin."""
    return clearly_faster(candidate, yours, margin)


def first_epoch_beats(confirmation: LoaderConfirmation, margin: float) -> bool | None:
    """Whether the candidate loads a first epoch faster than yours: by more than the margin at
    the medians and, with two rounds or more, in every round (None: not timed).

    Asked only of a candidate already clearly faster once running (judged beyond its noise on
    every batch interval of the rounds): what is left to ask is whether its start-up eats that
    gain over a first epoch. The rounds give one first epoch each, two by default: too few for
    an interval of their own (Student's t for two samples is 12.7, so a first epoch 1.6x faster
    in both rounds would not count), so each round must agree instead."""
    ratio = confirmation.first_epoch_ratio
    if ratio is None:
        return None
    if ratio <= 1.0 + margin:
        return False
    mine, theirs = confirmation.chosen_first_epochs_s, confirmation.yours_first_epochs_s
    return all(m < t for m, t in zip(mine, theirs))


def persistent_decision(
    loader: DataLoader[Any], trial: Trial, yours: LoaderSettings, margin: float
) -> tuple[bool, str]:
    """Whether to keep workers between epochs, from the measured start-up; and why."""
    settings = trial.settings
    if not settings.num_workers:
        return False, ""
    if yours.persistent_workers and yours.num_workers:
        return True, ""
    run = trial.run
    epoch = epoch_length(loader)
    if run is None or not epoch or not run.intervals_s:
        return settings.persistent_workers, ""
    saving = max(0.0, run.startup_s - run.interval_s)
    epoch_s = epoch * run.interval_s
    if saving > margin * epoch_s:
        return True, (
            f"persistent workers: starting {settings.num_workers} worker(s) took "
            f"{run.startup_s * 1e3:.0f} ms, paid again every epoch of {epoch} batches "
            f"({epoch_s:.2f} s) without them ({100 * saving / epoch_s:.0f} %; with a seeded "
            "generator, epochs after the first are shuffled in another order)"
        )
    return settings.persistent_workers, (
        f"workers are not kept between epochs: their start-up ({run.startup_s * 1e3:.0f} ms) is "
        f"{100 * saving / epoch_s:.1f} % of an epoch of {epoch} batches"
    )
